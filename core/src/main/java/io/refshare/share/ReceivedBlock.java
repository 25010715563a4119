package io.refshare.share;

import io.refshare.counter.CounterFile;

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
    /** The token this process holds: a slot of the sender's counter file. */
    final CounterFile counters;
    final int slot;

    ReceivedBlock(Sharing sharing, CounterFile counters, int slot, ReceivedSegment segment, long offset, long length) {
        super(sharing, segment, offset, length);
        this.counters = counters;
        this.slot = slot;
    }

    @Override
    void dispose() {
        sharing.releaseReceived(this, counters, slot, segment);
    }

    @Override
    String kind() {
        return "received";
    }
}
