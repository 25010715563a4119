package io.refshare.share;

/**
 * A block of another process (or of this one) mapped under a count kept elsewhere: unlike a
 * {@link ReceivedBlock} it takes no token of its own. Holders use it
 * ({@code io.refshare.SharedHolder}): one token keeps a published version alive for
 * every reader, and each reader's acquisition is counted in the holder's file. Disposing it
 * drops the segment reference (host: the mapping; device: the opened IPC segment, after this
 * process's stream is done with it) and then runs the action that gives the outside count
 * back.
 */
public final class ViewedBlock extends MappedBlock {
    private final Runnable onDispose;

    ViewedBlock(Sharing sharing, ReceivedSegment segment, long offset, long length, Runnable onDispose) {
        super(sharing, segment, offset, length);
        this.onDispose = onDispose;
    }

    @Override
    void dispose() {
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
