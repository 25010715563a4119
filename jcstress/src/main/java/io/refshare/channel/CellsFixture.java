package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ProcessIdentity;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A queue's cells ({@link QueueCells}) over a small piece of native memory laid out exactly
 * like a queue file, with a handle for participant entries 0 and 1. Messages are 16 bytes,
 * every byte the same value, so a torn read shows as mixed bytes.
 */
final class CellsFixture {
    static final long FAR = Long.MAX_VALUE / 2;
    static final int MESSAGE_BYTES = 16;

    final QueueCells first;
    final QueueCells second;
    /** The queue's two signals, and participant entry 1's offset (the waiter's, in the tests). */
    final QueueSignal notEmpty;
    final QueueSignal notFull;
    final long waiterEntry;
    final MemorySegment mem;

    CellsFixture(int capacity) {
        Geometry g = Geometry.of(capacity, MESSAGE_BYTES, 2);
        MemorySegment m = Arena.ofAuto().allocate(g.fileLength(), 64);
        mem = m;
        g.initialize(m, ProcessIdentity.current(), 0);
        first = new QueueCells(m, g, 0, "jcstress");
        second = new QueueCells(m, g, 1, "jcstress");
        notEmpty = QueueSignal.notEmpty(m);
        notFull = QueueSignal.notFull(m);
        waiterEntry = g.participantOffset(1);
    }

    /** The not-empty futex sequence word now. */
    int notEmptySequence() {
        return (int) ShmQueueLayout.INT.getVolatile(mem, ShmQueueLayout.NOT_EMPTY_SEQ_OFFSET);
    }

    static long deadline() {
        return System.nanoTime() + FAR;
    }

    /** Claims and publishes a message of {@code value}: the position, or what the claim answered. */
    static long put(QueueCells cells, byte value) {
        long t = cells.claimWritable(deadline());
        if (t >= 0) {
            byte[] message = new byte[MESSAGE_BYTES];
            java.util.Arrays.fill(message, value);
            cells.publish(t, Outgoing.of(message));
        }
        return t;
    }

    /**
     * Claims, reads and frees the head message: its value, -1 when empty, -2 when closed,
     * -3 when its bytes were torn (a read raced a write).
     */
    static int take(QueueCells cells) {
        long h = cells.claimReadable(deadline());
        if (h < 0) {
            return (int) h;
        }
        byte[] m = cells.read(h, cells.messageLength(h), Incoming.COPY);
        cells.freeCell(h);
        for (byte b : m) {
            if (b != m[0]) {
                return -3;
            }
        }
        return m.length == MESSAGE_BYTES ? m[0] : -3;
    }
}
