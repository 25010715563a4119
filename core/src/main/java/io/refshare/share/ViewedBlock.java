package io.refshare.share;

import io.refshare.wire.Backend;

/**
 * A block of another process (or of this one) mapped under a count kept elsewhere: unlike a
 * {@link ReceivedBlock} it takes no token of its own. Holders use it
 * ({@code io.refshare.SharedHolder}): one token keeps a published version alive for
 * every reader, and each reader's acquisition is counted in the holder's file. Disposing it
 * drops the segment reference (host: the mapping; device: the opened IPC segment, after this
 * process's stream is done with it; none for a block {@link #alongside} another) and then runs
 * the action that gives the outside count back.
 */
public final class ViewedBlock extends MappedBlock {
    private final Runnable onDispose;
    /** False for a block {@link #alongside} another, which holds the segment reference for it. */
    private final boolean holdsSegment;

    ViewedBlock(Sharing sharing, ReceivedSegment segment, long offset, long length, Runnable onDispose) {
        super(sharing, segment, offset, length);
        this.onDispose = onDispose;
        this.holdsSegment = true;
    }

    private ViewedBlock(ViewedBlock pin, Runnable onDispose) {
        super(pin);
        this.onDispose = onDispose;
        this.holdsSegment = false;
    }

    /**
     * Another view of this host block that takes no segment reference of its own (no lookup in
     * the receive cache, no lock): disposing it only runs {@code onDispose}. The caller must keep
     * this block until every view alongside it is disposed; a holder handle keeps one per version
     * it has seen, which outlives every acquisition of that version (see {@code SharedHolder}).
     *
     * @throws IllegalStateException for device memory, which is opened for each acquisition
     */
    public ViewedBlock alongside(Runnable onDispose) {
        if (backend() != Backend.HOST) {
            throw new IllegalStateException(this + ": only a host block can be viewed alongside");
        }
        return new ViewedBlock(this, onDispose);
    }

    @Override
    void dispose() {
        if (!holdsSegment) {
            onDispose.run();
            return;
        }
        try {
            sharing.releaseViewed(this, segment);
        } finally {
            onDispose.run(); // after our last access: the count it gives back may free the memory
        }
    }

    @Override
    String kind() {
        return "viewed";
    }
}
