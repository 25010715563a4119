package io.refshare.share;

import java.lang.foreign.MemorySegment;

/**
 * A block another process shared with this one: a token this process holds, and a view
 * into the sender's segment, mapped once per process however many blocks of it arrive.
 * Disposing it releases the token (the sender may then reuse the memory) and drops the
 * mapping reference; the last block of a segment unmaps it.
 *
 * <p>If the sender has died, the memory stays valid (the mapping outlives the file's
 * name) and the release still succeeds quietly.
 */
public final class ReceivedBlock extends Storage {
    private final Token token;
    private final ReceiveCache.Mapping mapping;
    private final long offset;
    private final MemorySegment bytes;

    ReceivedBlock(Sharing sharing, Token token, ReceiveCache.Mapping mapping, long offset, long length) {
        super(sharing);
        this.token = token;
        this.mapping = mapping;
        this.offset = offset;
        this.bytes = mapping.file().segment().asSlice(offset, length);
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
        sharing.receiveCache().release(token, mapping);
    }

    @Override
    public String toString() {
        return "received block of " + bytes.byteSize() + " bytes at " + offset + " in " + mapping.file().name();
    }
}
