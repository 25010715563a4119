package io.refshare.share;

import java.lang.foreign.MemorySegment;

/**
 * A block of another process (or of this one) mapped under a count kept elsewhere: unlike a
 * {@link ReceivedBlock} it takes no token of its own. Holders use it
 * ({@code io.refshare.holder.SharedHolder}): one token keeps a published version alive for
 * every reader, and each reader's acquisition is counted in the holder's file. Disposing it
 * drops the mapping reference and runs the action that gives the outside count back.
 */
public final class ViewedBlock extends Storage {
    private final ReceiveCache.Mapping mapping;
    private final long offset;
    private final MemorySegment bytes;
    private final Runnable onDispose;

    ViewedBlock(Sharing sharing, ReceiveCache.Mapping mapping, long offset, long length, Runnable onDispose) {
        super(sharing);
        this.mapping = mapping;
        this.offset = offset;
        this.bytes = mapping.file().segment().asSlice(offset, length);
        this.onDispose = onDispose;
    }

    @Override
    MemorySegment bytes() {
        return bytes;
    }

    @Override
    public long byteSize() {
        return bytes.byteSize();
    }

    @Override
    String segmentName() {
        return mapping.file().name();
    }

    @Override
    long segmentSize() {
        return mapping.file().size();
    }

    @Override
    long segmentOffset() {
        return offset;
    }

    @Override
    void dispose() {
        try {
            sharing.receiveCache().unmapSegment(mapping);
        } finally {
            onDispose.run(); // after our last access: the count it gives back may free the memory
        }
    }

    @Override
    public String toString() {
        return "viewed block of " + bytes.byteSize() + " bytes at " + offset + " in " + mapping.file().name();
    }
}
