package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.exceptions.InvalidDataException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

import static io.refshare.channel.ShmQueueLayout.*;

/**
 * The cell protocol of a queue file, alone: claiming a position, writing and publishing
 * its message, claiming it for reading, copying it out and freeing the cell. No waiting,
 * no wake-ups, no counting: {@link ShmQueue} adds those around it. Small enough to argue
 * about, and tested as such by the jcstress tests of the queue cells.
 *
 * <h2>Implementation notes</h2>
 * The core is Dmitry Vyukov's bounded MPMC array queue, with the claim moved into the
 * cell: a producer claims position {@code t} by one compare-and-set of the cell word from
 * FREE(t) to WRITING(t, itself), then moves the tail hint on; a consumer claims {@code h}
 * by FULL(h) &rarr; READING(h, itself), then moves the head hint on. Because the claim is
 * in the cell and names the claimant, a dead claimant can be recognised and its claim
 * repaired by a third party ({@code Recovery}), which a claim on the shared tail counter
 * would not allow.
 * <p>
 * Invariants: (1) the head and tail hints only grow, one position at a time, and only
 * past a position whose cell was claimed for it; so every position below the tail was
 * claimed by a producer and below the head by a consumer. (2) A cell word's position
 * only grows (FREE(p) &rarr; WRITING(p) &rarr; FULL(p) &rarr; READING(p) &rarr;
 * FREE(p + capacity)); each arrow is made by the one process that holds the claim, or by
 * a compare-and-set. (3) Hence, reading tail {@code t} then its cell: a cell still at an
 * earlier position means the queue was full at that moment; FREE(t) means {@code t} was
 * free; anything else means the tail hint was behind. Symmetrically for the head.
 * <p>
 * Memory ordering: the payload is written with plain stores while the cell is WRITING
 * and published by a volatile write of FULL; a consumer reads FULL with a volatile read
 * before reading the payload, and frees the cell with a volatile write after its last
 * read of it, so a producer never overwrites a payload being read.
 * <p>
 * Batches: a release store is all either hand-over needs (the reads and writes before it
 * become visible no later than the word). The volatile store is for what follows it: a
 * publisher or freer then reads the count of sleepers, and a sleeper counts itself before it
 * looks at the cells again; without a full fence between the store and that read, both could
 * miss the other (a store-load reordering, which x86 does). A batch stores with release and
 * fences once, after its last cell and before reading the sleepers: one fence per batch
 * instead of one per message (a fence is a locked instruction, tens of cycles, every message).
 * <p>
 * Claims: a claim first tries the word the cell holds when all is well (FREE(t) for a
 * producer, FULL(h) for a consumer) by a compare-and-set alone, and reads the word only when
 * that fails. The cell's line was last written by the other side; a read first would fetch
 * it shared and the compare-and-set then fetch it again to own it, two trips between CPUs
 * where one does. A failed attempt decides nothing: the read that follows does, as before.
 * <p>
 * Closing: a producer reads the closed flag before claiming and again after (abandoning
 * its claim when it is set), while a consumer reads it before looking at the head cell
 * and reports "closed" only when that cell shows no claimed position. All of these are
 * volatile, so a producer that saw "open" after claiming made its claim before the flag
 * was set, and every consumer that sees the flag also sees the claim: it waits for that
 * message instead of reporting the queue drained.
 * <p>
 * Positions in cell words wrap at 2<sup>46</sup>; a thread would have to stall for
 * 2<sup>45</sup> operations of the others to mistake one lap for another.
 */
final class QueueCells {
    /** {@link #claimWritable}: the queue is full. */
    static final long NO_ROOM = -1;
    /** {@link #claimReadable}: nothing is published at the head. */
    static final long EMPTY = -1;
    /** Either claim: the stream has ended (for a consumer: and nothing is left at the head). */
    static final long CLOSED = -2;
    /** Claim attempts between reads of the clock, so a lost race is cheap and a deadline still holds. */
    private static final int CLAIM_ROUNDS_PER_CLOCK_READ = 256;
    /**
     * A claim's deadline for a caller that waits without limit anyway: the claim never gives up
     * on time, and the caller reads no clock for a claim that succeeds at once (a clock read is
     * a good share of a small message's cost on some virtual machines).
     */
    static final long NO_DEADLINE = Long.MIN_VALUE;

    private final MemorySegment mem;
    private final Geometry geometry;
    private final int capacity;
    private final int claimant;
    private final Object file;

    /**
     * The cells of {@code mem}, claimed in the name of participant entry {@code claimant};
     * {@code file} names the queue in messages.
     */
    QueueCells(MemorySegment mem, Geometry geometry, int claimant, Object file) {
        this.mem = mem;
        this.geometry = geometry;
        this.capacity = geometry.capacity();
        this.claimant = claimant;
        this.file = file;
        // runs the give-back's code once now, to no effect (it counts 0 and expects a word the count
        // cannot hold), while the heap has room: a full heap is one reason to give a message back,
        // and the first run of a call site needs the heap
        returnCell(GIVEN_BACK_OFFSET, -1L, -1L, 0);
    }

    /**
     * Claims the tail cell for a producer: its position, {@link #NO_ROOM}, or {@link #CLOSED}
     * (also when the stream ended during the claim: the position is then freed again, and a
     * consumer waiting on it should be woken). {@link #NO_ROOM} also once {@code deadline}
     * (a {@link System#nanoTime()} value, or {@link #NO_DEADLINE}) has passed while the cells
     * keep changing under it.
     */
    long claimWritable(long deadline) {
        if (isClosed()) {
            return CLOSED;
        }
        int skipped = 0;
        for (int round = 1; ; round++) {
            if (round % CLAIM_ROUNDS_PER_CLOCK_READ == 0 && deadline != NO_DEADLINE
                    && System.nanoTime() - deadline >= 0) {
                return NO_ROOM; // lost every race for this long: a hostile writer, or the caller's time is up
            }
            long t = (long) LONG.getVolatile(mem, TAIL_OFFSET);
            long cell = cellOffset(t);
            if (LONG.compareAndSet(mem, cell + CELL_WORD, free(t), writing(t, claimant))) { // see "Claims"
                return claimedTail(t, cell);
            }
            long word = (long) LONG.getVolatile(mem, cell + CELL_WORD);
            long d = distance(word, t);
            if (d == 0 && state(word) == FREE) {
                if (LONG.compareAndSet(mem, cell + CELL_WORD, word, writing(t, claimant))) { // FREE(t) with stray bits
                    return claimedTail(t, cell);
                }
            } else if (d < 0) {
                return NO_ROOM;
            } else if (LONG.compareAndSet(mem, TAIL_OFFSET, t, t + 1) && d > 0 && ++skipped > 2 * capacity) {
                throw cellsAhead("tail", t, word);
            }
        }
    }

    /** The end of a producer's claim of position {@code t}: the tail moves on, and a close meanwhile undoes it. */
    private long claimedTail(long t, long cell) {
        LONG.compareAndSet(mem, TAIL_OFFSET, t, t + 1);
        if (isClosed()) {
            // closed while claiming: give the position up, as a dead producer's is
            LONG.setVolatile(mem, cell + CELL_WORD, free(t + capacity));
            return CLOSED;
        }
        return t;
    }

    /** Writes the message of a position claimed by {@link #claimWritable} and publishes it (FULL). */
    void publish(long position, Outgoing message) {
        LONG.setVolatile(mem, write(position, message), full(position));
    }

    /**
     * {@link #publish} for one message of a batch: FULL is a release store, which is all the
     * consumer's acquiring read needs, and the caller issues one {@link #fenceBatch} after the
     * batch, before it looks at the sleepers (see "Batches").
     */
    void publishInBatch(long position, Outgoing message) {
        LONG.setRelease(mem, write(position, message), full(position));
    }

    /** Writes the message of a claimed position; returns the offset of its cell word. */
    private long write(long position, Outgoing message) {
        long cell = cellOffset(position);
        mem.set(LE_INT, cell + CELL_LENGTH_FIELD, message.byteSize());
        message.writeTo(mem, cell + CELL_PAYLOAD);
        return cell + CELL_WORD;
    }

    /**
     * Claims the head cell for a consumer: its position, {@link #EMPTY}, or {@link #CLOSED}
     * once the stream ended and no producer holds the head position. {@link #EMPTY} also
     * once {@code deadline} (or never, for {@link #NO_DEADLINE}) has passed while the cells
     * keep changing under it.
     */
    long claimReadable(long deadline) {
        int skipped = 0;
        for (int round = 1; ; round++) {
            if (round % CLAIM_ROUNDS_PER_CLOCK_READ == 0 && deadline != NO_DEADLINE
                    && System.nanoTime() - deadline >= 0) {
                return EMPTY;
            }
            boolean closed = isClosed();
            long h = (long) LONG.getVolatile(mem, HEAD_OFFSET);
            long cell = cellOffset(h);
            if (LONG.compareAndSet(mem, cell + CELL_WORD, full(h), reading(h, claimant))) { // see "Claims"
                LONG.compareAndSet(mem, HEAD_OFFSET, h, h + 1);
                return h;
            }
            long word = (long) LONG.getVolatile(mem, cell + CELL_WORD);
            long d = distance(word, h);
            int state = state(word);
            if (d == 0 && state == FULL) {
                if (LONG.compareAndSet(mem, cell + CELL_WORD, word, reading(h, claimant))) { // FULL(h) with stray bits
                    LONG.compareAndSet(mem, HEAD_OFFSET, h, h + 1);
                    return h;
                }
            } else if (d < 0 || (d == 0 && state != READING)) {
                // nothing published at h; "drained" only if no producer holds h either
                return closed && !(d == 0 && state == WRITING) ? CLOSED : EMPTY;
            } else if (LONG.compareAndSet(mem, HEAD_OFFSET, h, h + 1) && d > 0 && ++skipped > 2 * capacity) {
                throw cellsAhead("head", h, word);
            }
        }
    }

    /**
     * The length of the message of a position this participant holds in READING.
     *
     * @throws InvalidDataException when the cell states an impossible length
     */
    int messageLength(long position) {
        int length = mem.get(LE_INT, cellOffset(position) + CELL_LENGTH_FIELD);
        if (length < 0 || length > geometry.maxMessageBytes()) {
            throw new InvalidDataException("queue " + file + ": the message at position " + position + " claims "
                    + length + " bytes, cells hold at most " + geometry.maxMessageBytes()
                    + "; a corrupt or hostile writer. The cell was skipped");
        }
        return length;
    }

    /**
     * Reads the message of a position this participant holds in READING, of the
     * {@link #messageLength} checked before, in place with {@code reader} (the cell stays
     * claimed: {@link #freeCell} or {@link #giveBack} it after).
     */
    <T> T read(long position, int length, Incoming<T> reader) {
        return reader.readFrom(mem, cellOffset(position) + CELL_PAYLOAD, length);
    }

    /** Frees the cell of a position read (or abandoned) for the position a lap later. */
    void freeCell(long position) {
        LONG.setVolatile(mem, cellOffset(position) + CELL_WORD, free(position + capacity));
    }

    /** {@link #freeCell} for one message of a batch: a release store, the caller fences once after the batch. */
    void freeCellInBatch(long position) {
        LONG.setRelease(mem, cellOffset(position) + CELL_WORD, free(position + capacity));
    }

    /** The one full fence after a batch of {@link #publishInBatch} or {@link #freeCellInBatch} stores. */
    static void fenceBatch() {
        VarHandle.fullFence();
    }

    /**
     * Hands a message this participant claimed back to the queue, unconsumed: the cell
     * becomes READING(p, {@link ShmQueueLayout#RETURNED}), which recovery treats as a dead
     * claimant's, so exactly one consumer adopts it later. The count of give-backs goes up
     * first, so a waiter that sees the cell also sees that it must scan for it.
     *
     * @return false when the cell was no longer this participant's (a hostile writer): whoever
     *         holds it now deals with it
     */
    boolean giveBack(long position) {
        return returnCell(cellOffset(position) + CELL_WORD, reading(position, claimant), reading(position, RETURNED),
                1);
    }

    private boolean returnCell(long wordOffset, long claimed, long returned, long count) {
        LONG.getAndAdd(mem, GIVEN_BACK_OFFSET, count);
        return LONG.compareAndSet(mem, wordOffset, claimed, returned);
    }

    /** True when at most half the cells hold positions claimed and not yet taken (a hint, from the two hints). */
    boolean atMostHalfFull() {
        long t = (long) LONG.getVolatile(mem, TAIL_OFFSET);
        return t - (long) LONG.getVolatile(mem, HEAD_OFFSET) <= capacity / 2;
    }

    /** True when the tail cell is free for the tail position (a hint: it may change at once). */
    boolean hasRoom() {
        long t = (long) LONG.getVolatile(mem, TAIL_OFFSET);
        long word = (long) LONG.getVolatile(mem, cellOffset(t) + CELL_WORD);
        return distance(word, t) >= 0;
    }

    /** True when the head cell holds a message or the head hint is behind (worth a try). */
    boolean hasMessage() {
        long h = (long) LONG.getVolatile(mem, HEAD_OFFSET);
        long word = (long) LONG.getVolatile(mem, cellOffset(h) + CELL_WORD);
        long d = distance(word, h);
        return d > 0 || (d == 0 && (state(word) == FULL || state(word) == READING));
    }

    /** True once the stream ended, for any reason. */
    boolean isClosed() {
        return closedState() != OPEN;
    }

    /** {@link ShmQueueLayout#OPEN}, {@link ShmQueueLayout#ENDED_BY_PRODUCER} or {@link ShmQueueLayout#ENDED_BY_PRODUCERS_DEATH}. */
    int closedState() {
        return (int) INT.getVolatile(mem, CLOSED_OFFSET);
    }

    /** Ends the stream for {@code why} unless it has already ended (the first reason stays); true when this call ended it. */
    boolean endStream(int why) {
        // read first: on a file cut short under us the read faults (an InternalError the close
        // path answers), where a compare-and-set on the cut page would end the JVM
        return (int) INT.getVolatile(mem, CLOSED_OFFSET) == OPEN && INT.compareAndSet(mem, CLOSED_OFFSET, OPEN, why);
    }

    long cellOffset(long position) {
        return geometry.cellOffset((int) Long.remainderUnsigned(position, capacity));
    }

    /**
     * A hint we moved past a cell already serving a later position: in a sound file that
     * happens only once per position a dead participant left (recovery frees it a lap
     * ahead), so more than two laps of it in one call means the cell words were
     * overwritten. Refused rather than walked one position at a time, which could take
     * 2^45 steps.
     */
    private InvalidDataException cellsAhead(String hint, long position, long word) {
        return new InvalidDataException("queue " + file + " is corrupt: its cells serve positions ahead of the "
                + hint + " (" + position + ", cell word 0x" + Long.toHexString(word) + "); a corrupt or hostile writer");
    }
}
