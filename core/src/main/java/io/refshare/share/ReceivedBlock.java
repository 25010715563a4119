package io.refshare.share;

/**
 * A block another process shared with this one: a token this process holds, and a view
 * into the sender's segment, mapped (host) or opened (device) once per process however many
 * blocks of it arrive. Disposing it releases the token (the sender may then reuse the
 * memory) and drops the segment reference; the last block of a segment unmaps it.
 *
 * <p>If the sender has died, host memory stays valid (the mapping outlives the file's
 * name) and the release still succeeds quietly.
 */
public final class ReceivedBlock extends MappedBlock {
    private final Token token;

    ReceivedBlock(Sharing sharing, Token token, ReceivedSegment segment, long offset, long length) {
        super(sharing, segment, offset, length);
        this.token = token;
    }

    @Override
    void dispose() {
        sharing.releaseReceived(this, token, segment);
    }

    @Override
    String kind() {
        return "received";
    }
}
