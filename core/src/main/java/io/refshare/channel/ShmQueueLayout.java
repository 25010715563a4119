package io.refshare.channel;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LittleEndian;
import io.refshare.shm.ProcessIdentity;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The layout of a queue file, described once. Every multi-byte field is little-endian;
 * every field another process updates is a naturally aligned 32- or 64-bit word.
 *
 * <pre>
 * Header, read-mostly line:
 *   0                   8         12        16                  24                  32
 *   +-------------------+---------+---------+-------------------+-------------------+
 *   | magic "RSQUEUE1"  | version | hdrLen  |     owner pid     | owner start ticks |
 *   +---------+---------+---------+---------+---------+---------+-------------------+
 *   |capacity | maxMsg  | cellLen | partCap | closed  | (0)     |  given back (8)   |
 *   +---------+---------+---------+---------+---------+---------+-------------------+ 64
 *    closed: 0 open; 1 ended by a producer (endOfStream, the creator's close); 2 ended by
 *      the death of every producer (set by a consumer that found the queue empty and
 *      every producer dead). Only ever moves away from 0, by one compare-and-set.
 *    given back: how many claimed messages consumers gave back (cells READING(p, 0xFFFF))
 *      ever; a waiter scans the cells for them only when it changed since its last scan
 * Header, totals (written rarely):
 *   | offered by departed (8)  | taken by departed (8)  | rejected (8)  | (0) ...   |
 *   +---------------------------------------------------------------------------------+ 128
 * Header, one line pair each (written by every producer, consumer, sleeper, spinner):
 *   128 | tail (8)                                                     ... (0) to 256 |
 *   256 | head (8)                                                     ... (0) to 384 |
 *   384 | not-empty futex seq (4) | consumers sleeping (4)  ... (0) to 448 |
 *   448 | consumers spinning (4) | consumer wake pending (4) ... (0) to 512 |
 *   512 | not-full futex seq (4)  | producers sleeping (4)   ... (0) to 576 |
 *   576 | producers spinning (4) | producer wake pending (4) ... (0) to 640 |
 *   +---------------------------------------------------------------------------------+ 640 = hdrLen
 *    spinning: waiters polling the queue instead of sleeping, counted so that a signaller
 *      skips the wake-up a spinner makes unneeded; wake pending: 1 while a wake-up is on its
 *      way to a sleeper, so other signallers skip theirs (their own line: spinners write it
 *      on every wait, and a signaller reads it only when someone sleeps)
 * Participant table, partCap entries of 64 bytes (one cache line each):
 *   0                  8      12     16            24            32       36       40          48     52     56    64
 *   +------------------+------+------+-------------+-------------+--------+--------+-----------+------+------+-----+
 *   | identity (8)     | role | (0)  | offered (8) | taken (8)   | c.slp  | p.slp  | pid ns (8)|c.spin|p.spin| (0) |
 *   +------------------+------+------+-------------+-------------+--------+--------+-----------+------+------+-----+
 *    identity: pid in bits 0..21, start ticks in bits 22..62; 0 = free entry; bit 63 set:
 *      the entry's participant is dead and the process named in bits 0..62 is folding
 *      its counts into the totals (a dead folder's mark is taken over by the next one)
 *    role: bit 0 has offered, bit 1 has polled; c.slp / p.slp: this participant's
 *    share of the sleeping counts above (int), so a dead sleeper's share can be removed;
 *    c.spin / p.spin: the same for the spinning counts;
 *    pid ns: inode of the participant's PID namespace (/proc/self/ns/pid), 0 while being
 *    registered or unknown; for inspection only: liveness is judged by the identity's life
 *    file in the directory, which holds across namespaces
 * Cells, capacity entries of cellLen bytes (cellLen = 16 + maxMsg rounded up to 64):
 *   +------------------+------------+---------+---------------------------- ... ---+
 *   | cell word (8)    | length (4) | (0)     | payload (length bytes)             |
 *   +------------------+------------+---------+---------------------------- ... ---+
 * </pre>
 *
 * <p>The <b>cell word</b> is the per-cell sequence of a Vyukov queue with the claimant
 * written into it, so that a claim made by a process that then died can be recognised:
 * <pre>
 *   63                48 47  46 45                                            0
 *   +-------------------+------+-----------------------------------------------+
 *   | claimant index    | state|          position mod 2^46                    |
 *   +-------------------+------+-----------------------------------------------+
 *   state: 0 FREE    (the producer of this position may claim it)
 *          1 WRITING (claimed by that producer, payload being written)
 *          2 FULL    (message of this position published)
 *          3 READING (claimed by that consumer, payload being read)
 *   claimant index: the participant-table entry of the claimant, WRITING and READING only;
 *     0xFFFF in READING ({@link #RETURNED}): the consumer that claimed the message gave it
 *     back (a fixed resource it needed was exhausted), so any consumer may adopt it, as it
 *     would a dead claimant's. Hence at most 65535 participant entries.
 * </pre>
 * Cell {@code p % capacity} serves the positions {@code p, p + capacity, ...}; a consumer
 * that finishes position {@code p} turns the cell into FREE for {@code p + capacity}.
 * Positions in cell words are compared modulo 2<sup>46</sup> (signed distance), so the
 * head and tail words may count on for the life of the file.
 *
 * <p><b>tail</b> and <b>head</b> are hints of the next position to produce and to consume:
 * they only move forward, one position at a time, and only past a position whose cell was
 * already claimed for it; anyone who finds them behind moves them on.
 *
 * <p>The layout and the queue protocol are specified in
 * {@code docs/protocol.md}, section 9: the reference for every implementation.
 */
public final class ShmQueueLayout {
    public static final long MAGIC = 0x3145554555515352L; // "RSQUEUE1" read little-endian
    public static final int VERSION = 1;

    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long HEADER_LENGTH_OFFSET = 12;
    public static final long OWNER_PID_OFFSET = 16;
    public static final long OWNER_START_OFFSET = 24;
    public static final long CAPACITY_OFFSET = 32;
    public static final long MAX_MESSAGE_OFFSET = 36;
    public static final long CELL_LENGTH_OFFSET = 40;
    public static final long PARTICIPANT_CAPACITY_OFFSET = 44;
    public static final long CLOSED_OFFSET = 48;
    public static final long GIVEN_BACK_OFFSET = 56;
    public static final long OFFERED_BY_DEPARTED_OFFSET = 64;
    public static final long TAKEN_BY_DEPARTED_OFFSET = 72;
    public static final long REJECTED_OFFSET = 80;
    public static final long TAIL_OFFSET = 128;
    public static final long HEAD_OFFSET = 256;
    public static final long NOT_EMPTY_SEQ_OFFSET = 384;
    public static final long CONSUMERS_SLEEPING_OFFSET = 388;
    public static final long CONSUMERS_SPINNING_OFFSET = 448;
    public static final long CONSUMER_WAKE_PENDING_OFFSET = 452;
    public static final long NOT_FULL_SEQ_OFFSET = 512;
    public static final long PRODUCERS_SLEEPING_OFFSET = 516;
    public static final long PRODUCERS_SPINNING_OFFSET = 576;
    public static final long PRODUCER_WAKE_PENDING_OFFSET = 580;
    public static final int HEADER_LENGTH = 640;

    public static final int PARTICIPANT_LENGTH = 64;
    public static final long PARTICIPANT_IDENTITY = 0;
    public static final long PARTICIPANT_ROLE = 8;
    public static final long PARTICIPANT_OFFERED = 16;
    public static final long PARTICIPANT_TAKEN = 24;
    public static final long PARTICIPANT_CONSUMERS_SLEEPING = 32;
    public static final long PARTICIPANT_PRODUCERS_SLEEPING = 36;
    public static final long PARTICIPANT_PID_NAMESPACE = 40;
    public static final long PARTICIPANT_CONSUMERS_SPINNING = 48;
    public static final long PARTICIPANT_PRODUCERS_SPINNING = 52;
    public static final int ROLE_PRODUCER = 1;
    public static final int ROLE_CONSUMER = 2;

    public static final long CELL_WORD = 0;
    public static final long CELL_LENGTH_FIELD = 8;
    public static final long CELL_PAYLOAD = 16;
    public static final int CELL_ALIGNMENT = 64;

    public static final int FREE = 0;
    public static final int WRITING = 1;
    public static final int FULL = 2;
    public static final int READING = 3;

    /** The claimant of a READING cell whose consumer gave the message back. */
    public static final int RETURNED = 0xFFFF;

    public static final int OPEN = 0;
    public static final int ENDED_BY_PRODUCER = 1;
    public static final int ENDED_BY_PRODUCERS_DEATH = 2;

    public static final int MAX_CAPACITY = 1 << 20;
    public static final int MAX_MESSAGE_BYTES = 1 << 16;
    public static final int DEFAULT_MAX_MESSAGE_BYTES = 512;
    /** The claimant field has 16 bits and its top value is {@link #RETURNED}. */
    public static final int MAX_PARTICIPANTS = (1 << 16) - 1;
    public static final int DEFAULT_PARTICIPANTS = 128;

    static final int POSITION_BITS = 46;
    static final long POSITION_MASK = (1L << POSITION_BITS) - 1;
    private static final int STATE_SHIFT = POSITION_BITS;
    private static final int CLAIMANT_SHIFT = POSITION_BITS + 2;

    private static final long RECLAIM_MARK = 1L << 63;

    /** Atomic access to 64-bit words of the file. */
    static final VarHandle LONG = LittleEndian.ATOMIC_LONG;
    /** Atomic access to 32-bit words of the file (futex words are 32-bit). */
    static final VarHandle INT = LittleEndian.ATOMIC_INT;
    static final ValueLayout.OfInt LE_INT = LittleEndian.INT;
    static final ValueLayout.OfLong LE_LONG = LittleEndian.LONG;

    private ShmQueueLayout() {
    }

    /** The geometry a header describes; {@link #read} refuses any that cannot be right. */
    record Geometry(int capacity, int maxMessageBytes, int cellLength, int participantCapacity) {

        static Geometry of(int capacity, int maxMessageBytes, int participantCapacity) {
            if (capacity < 1 || capacity > MAX_CAPACITY) {
                throw new IllegalArgumentException("queue capacity must be in 1.." + MAX_CAPACITY + ": " + capacity);
            }
            if (maxMessageBytes < 1 || maxMessageBytes > MAX_MESSAGE_BYTES) {
                throw new IllegalArgumentException("maximum message size must be in 1.." + MAX_MESSAGE_BYTES
                        + " bytes: " + maxMessageBytes);
            }
            if (participantCapacity < 1 || participantCapacity > MAX_PARTICIPANTS) {
                throw new IllegalArgumentException("participant capacity must be in 1.." + MAX_PARTICIPANTS + ": "
                        + participantCapacity);
            }
            return new Geometry(capacity, maxMessageBytes, ShmQueueLayout.cellLength(maxMessageBytes), participantCapacity);
        }

        long participantOffset(int index) {
            return HEADER_LENGTH + (long) index * PARTICIPANT_LENGTH;
        }

        long cellsOffset() {
            return HEADER_LENGTH + (long) participantCapacity * PARTICIPANT_LENGTH;
        }

        long cellOffset(int index) {
            return cellsOffset() + (long) index * cellLength;
        }

        long fileLength() {
            return cellsOffset() + (long) capacity * cellLength;
        }

        /**
         * Reads and checks the header of a file of {@code fileSize} bytes; anything that does
         * not describe a queue this code can serve is refused before any other field is used.
         */
        static Geometry read(MemorySegment mem, long fileSize, String file) {
            if (fileSize < HEADER_LENGTH) {
                throw new InvalidDataException(file + " is truncated: " + fileSize + " bytes, a queue header alone is "
                        + HEADER_LENGTH);
            }
            FileHeader.check(mem, MAGIC, VERSION, "queue", file);
            int headerLength = mem.get(LE_INT, HEADER_LENGTH_OFFSET);
            int capacity = mem.get(LE_INT, CAPACITY_OFFSET);
            int maxMessage = mem.get(LE_INT, MAX_MESSAGE_OFFSET);
            int cellLength = mem.get(LE_INT, CELL_LENGTH_OFFSET);
            int participants = mem.get(LE_INT, PARTICIPANT_CAPACITY_OFFSET);
            if (headerLength != HEADER_LENGTH || capacity < 1 || capacity > MAX_CAPACITY || maxMessage < 1
                    || maxMessage > MAX_MESSAGE_BYTES || participants < 1 || participants > MAX_PARTICIPANTS
                    || cellLength != ShmQueueLayout.cellLength(maxMessage)) {
                throw new InvalidDataException(file + " has a corrupt queue header: header length " + headerLength
                        + ", capacity " + capacity + ", max message " + maxMessage + " bytes, cell length "
                        + cellLength + ", " + participants + " participant entries");
            }
            Geometry g = new Geometry(capacity, maxMessage, cellLength, participants);
            if (fileSize < g.fileLength()) {
                throw new InvalidDataException(file + " is truncated: " + fileSize + " bytes, its header describes "
                        + g.fileLength());
            }
            return g;
        }

        /**
         * Writes a fresh header and cells for positions starting at {@code firstPosition}
         * (0 for every real queue; tests start near the 2^46 wrap). The magic goes last,
         * so a reader never accepts a half-written header.
         */
        void initialize(MemorySegment mem, ProcessIdentity owner, long firstPosition) {
            FileHeader.write(mem, VERSION, HEADER_LENGTH, owner);
            mem.set(LE_INT, CAPACITY_OFFSET, capacity);
            mem.set(LE_INT, MAX_MESSAGE_OFFSET, maxMessageBytes);
            mem.set(LE_INT, CELL_LENGTH_OFFSET, cellLength);
            mem.set(LE_INT, PARTICIPANT_CAPACITY_OFFSET, participantCapacity);
            mem.set(LE_LONG, TAIL_OFFSET, firstPosition);
            mem.set(LE_LONG, HEAD_OFFSET, firstPosition);
            for (int c = 0; c < capacity; c++) {
                long position = firstPosition + Math.floorMod(c - firstPosition, (long) capacity);
                mem.set(LE_LONG, cellOffset(c) + CELL_WORD, free(position));
            }
            FileHeader.publish(mem, MAGIC);
        }
    }

    /** Bytes of one cell: word, length, reserved, payload, rounded up to a cache line. */
    public static int cellLength(int maxMessageBytes) {
        int raw = (int) CELL_PAYLOAD + maxMessageBytes;
        return (raw + CELL_ALIGNMENT - 1) / CELL_ALIGNMENT * CELL_ALIGNMENT;
    }

    static long free(long position) {
        return position & POSITION_MASK;
    }

    static long writing(long position, int claimant) {
        return (position & POSITION_MASK) | ((long) WRITING << STATE_SHIFT) | ((long) claimant << CLAIMANT_SHIFT);
    }

    static long full(long position) {
        return (position & POSITION_MASK) | ((long) FULL << STATE_SHIFT);
    }

    static long reading(long position, int claimant) {
        return (position & POSITION_MASK) | ((long) READING << STATE_SHIFT) | ((long) claimant << CLAIMANT_SHIFT);
    }

    static int state(long word) {
        return (int) (word >>> STATE_SHIFT) & 3;
    }

    static int claimant(long word) {
        return (int) (word >>> CLAIMANT_SHIFT);
    }

    /** The position a cell word is about, modulo 2^46. */
    static long position(long word) {
        return word & POSITION_MASK;
    }

    /**
     * Signed distance from {@code position} to the position in {@code word}, modulo 2^46:
     * negative when the cell still serves an earlier position, positive when a later one.
     */
    static long distance(long word, long position) {
        return ((word - position) << (64 - POSITION_BITS)) >> (64 - POSITION_BITS);
    }

    /** The entry word by which {@code packedReclaimer} announces it is folding a dead entry. */
    static long reclaimMark(long packedReclaimer) {
        return packedReclaimer | RECLAIM_MARK;
    }

    /**
     * True when an entry word names no process (pid 0): never written by a participant,
     * so garbage from a corrupt or hostile writer, and never a live claimant.
     */
    static boolean namesNoProcess(long entryWord) {
        return (entryWord & ProcessIdentity.MAX_PID) == 0;
    }

    static boolean isReclaimMark(long entryWord) {
        return (entryWord & RECLAIM_MARK) != 0;
    }

    static long withoutReclaimMark(long entryWord) {
        return entryWord & ~RECLAIM_MARK;
    }
}
