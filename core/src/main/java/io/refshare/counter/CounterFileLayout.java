package io.refshare.counter;

/**
 * The layout of a counter file, described once. All fields are little-endian; every
 * field that another process updates is a naturally aligned 64-bit word changed only by
 * atomic read-modify-write.
 *
 * <pre>
 *   0                   8                  16                 24                 32
 *   +-------------------+---------+--------+-------------------+-------------------+
 *   | magic "RSCOUNT1"  | version | hdrLen |     owner pid     | owner start ticks |
 *   +---------+---------+---------+--------+-------------------+-------------------+
 *   | slotCap | peerCap |    handed out    |       flags       |     releases      |
 *   +---------+---------+------------------+-------------------+-------------------+ 64
 *   | collector waiting |                        (0)                              |
 *   +-------------------+-----------------------------------------------------------+ 128
 *   | peer 0: pid (8) | start ticks (8) |  peer 1 ...                 (peerCap x 16) |
 *   +--------------------------------------------------------------------------------+ 128 + 16 * peerCap
 *   | slot 0 (8) | slot 1 (8) | ...                                    (slotCap x 8) |
 *   +--------------------------------------------------------------------------------+
 * </pre>
 *
 * <ul>
 * <li><b>handed out</b>: slots given out so far, written only by the owner (slots are handed
 *     out sequentially by increasing offset and never twice in one file).</li>
 * <li><b>flags</b>: {@link #FLAG_RETIRED} once the owner hands out no more slots from this file.</li>
 * <li><b>releases</b>: incremented by every process that releases a slot; a cheap
 *     "something changed" signal for the owner's collection, and a statistic. Its low 32
 *     bits are also the futex word the owner's collector sleeps on.</li>
 * <li><b>collector waiting</b>: non-zero while the owner's collector sleeps on the releases
 *     word; a releasing process then wakes it, so memory comes back within microseconds of
 *     the last release, while no release pays a system call when nobody sleeps.</li>
 * <li><b>peer table</b>: processes that hold slots, each entry claimed once by a
 *     compare-and-set of its pid word from 0, then its start ticks are written. An entry
 *     whose start ticks are still 0 is being registered.</li>
 * <li><b>slot</b>: one counted reference (a <i>token</i>) of one message, as a state word:
 * <pre>
 *   63                            32 31                      8 7          0
 *   +-------------------------------+-------------------------+------------+
 *   |          reserved (0)         |   holder peer index + 1 |   state    |
 *   +-------------------------------+-------------------------+------------+
 *   state: 0 FREE (not handed out), 1 IN_FLIGHT (counted at send, no holder yet),
 *          2 HELD (by the peer named in the holder field), 3 RELEASED
 * </pre>
 *     Every transition is one compare-and-set of the whole word, so a reference moves
 *     from the sender to exactly one holder and back to nobody exactly once: it can be
 *     neither taken twice nor released twice, and a dead holder's references are found
 *     by its peer index alone.</li>
 * </ul>
 *
 * <p>The layout and every token transition are specified in
 * {@code docs/protocol.md}, section 8: the reference for every implementation.
 */
public final class CounterFileLayout {
    public static final long MAGIC = 0x31544E554F435352L; // "RSCOUNT1" little-endian
    public static final int VERSION = 1;

    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long HEADER_LENGTH_OFFSET = 12;
    public static final long OWNER_PID_OFFSET = 16;
    public static final long OWNER_START_OFFSET = 24;
    public static final long SLOT_CAPACITY_OFFSET = 32;
    public static final long PEER_CAPACITY_OFFSET = 36;
    public static final long HANDED_OUT_OFFSET = 40;
    public static final long FLAGS_OFFSET = 48;
    public static final long RELEASES_OFFSET = 56;
    public static final long COLLECTOR_WAITING_OFFSET = 64;
    public static final int HEADER_LENGTH = 128;

    public static final int PEER_ENTRY_LENGTH = 16;
    public static final int SLOT_LENGTH = 8;

    public static final long FLAG_RETIRED = 1;

    public static final int MAX_SLOTS = 1 << 20;
    public static final int MAX_PEERS = 1 << 16;

    public static final int FREE = 0;
    public static final int IN_FLIGHT = 1;
    public static final int HELD = 2;
    public static final int RELEASED = 3;

    private CounterFileLayout() {
    }

    public static long peerOffset(int peer) {
        return HEADER_LENGTH + (long) peer * PEER_ENTRY_LENGTH;
    }

    public static long slotsOffset(int peerCapacity) {
        return HEADER_LENGTH + (long) peerCapacity * PEER_ENTRY_LENGTH;
    }

    public static long fileLength(int slotCapacity, int peerCapacity) {
        return slotsOffset(peerCapacity) + (long) slotCapacity * SLOT_LENGTH;
    }

    public static long held(int peer) {
        return HELD | ((long) (peer + 1) << 8);
    }

    public static int state(long word) {
        return (int) (word & 0xFF);
    }

    /** The holder's peer index of a HELD word, or -1. */
    public static int holder(long word) {
        return state(word) == HELD ? (int) ((word >>> 8) & 0xFF_FFFF) - 1 : -1;
    }
}
