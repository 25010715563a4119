package io.refshare.counter;

/**
 * The layout of a counter file, described once. All fields are little-endian; every
 * field that another process updates is a naturally aligned 64-bit word changed only by
 * atomic read-modify-write.
 *
 * <pre>
 *   0                   8         12       16                 24                 32
 *   +-------------------+---------+--------+-------------------+-------------------+
 *   | magic "RSCOUNT1"  | version | hdrLen |     owner pid     | owner start ticks |
 *   +---------+---------+---------+--------+-------------------+-------------------+ 32
 *   | slotCap | peerCap |    handed out    |       flags       |        (0)        |
 *   +---------+---------+------------------+-------------------+-------------------+ 64
 *   |     releases      | collector waiting |                (0)                     |
 *   +-------------------+-------------------+---------------------------------------+ 128
 *   | peer 0: pid (8) | start ticks (8) |  peer 1 ...                 (peerCap x 16) |
 *   +--------------------------------------------------------------------------------+ 128 + 16 * peerCap
 *   | slot 0 (8) | slot 1 (8) | ...                                    (slotCap x 8) |
 *   +--------------------------------------------------------------------------------+
 * </pre>
 *
 * <ul>
 * <li><b>handed out</b>: slots given out so far, written only by the owner (slots are handed
 *     out sequentially by increasing offset and never twice in one file). Informative: the
 *     owner counts in its own memory and never trusts this word.</li>
 * <li><b>flags</b>: {@link #FLAG_RETIRED} once the owner hands out no more slots from this file.</li>
 * <li><b>cache lines</b>: the first 64 bytes are the owner's, written at every hand-out; the
 *     words every releasing process touches ({@code releases}, {@code collector waiting})
 *     have the second line to themselves, so sends and releases do not contend for a line.</li>
 * <li><b>releases</b>: incremented by every process that releases a slot; a cheap
 *     "something changed" signal for the owner's collection, and a statistic. Its low 32
 *     bits are also the futex word the owner's collector sleeps on.</li>
 * <li><b>collector waiting</b>: non-zero while the owner's collector sleeps on the releases
 *     word; the releasing process that clears it (compare-and-set to 0) wakes it, so memory
 *     comes back within microseconds of the last release, while no release pays a system
 *     call when nobody sleeps and one sleep costs one wake-up however many release.</li>
 * <li><b>peer table</b>: the processes that hold (or held) tokens of this file. An entry is
 *     (pid word, start ticks word) and is <i>free</i> (pid 0), <i>registering</i> (pid set,
 *     start 0) or <i>registered</i>. A registrant first holds its life lock in the directory
 *     ({@link io.refshare.shm.ShmDirectory#holdLifeLock()}), then CASes the pid word of any
 *     free entry from 0 to its pid, then writes its start ticks. Entries are recycled, so
 *     free and used ones interleave: every scan covers the whole table. An entry is freed
 *     (start word to 0, then pid word to 0) only after every token it holds is released, and
 *     only by
 *     <ul>
 *     <li>its own process, leaving cleanly (it released its tokens first), or</li>
 *     <li>the file's owner (its collector, one thread at a time) once the process is DEAD
 *         by the life-file verdict and its tokens were reclaimed, or when the entry was left
 *         registering by a process of that pid of which no life file is held any more.</li>
 *     </ul>
 *     Nobody else frees another process's entry: a third process racing the owner could
 *     release the tokens of the entry's next occupant.</li>
 * <li><b>slot</b>: one counted reference (a <i>token</i>) of one message, as a state word:
 * <pre>
 *   63                            32 31                      8 7          0
 *   +-------------------------------+-------------------------+------------+
 *   |           range tag           |   holder peer index + 1 |   state    |
 *   +-------------------------------+-------------------------+------------+
 *   state: 0 FREE (not handed out; the whole word is 0), 1 IN_FLIGHT (counted at send,
 *          no holder yet), 2 HELD (by the peer named in the holder field), 3 RELEASED
 *   range tag: {@link RangeTag} of the block the token was handed out for
 * </pre>
 *     Every transition is one compare-and-set of the whole word, so a reference moves
 *     from the sender to exactly one holder and back to nobody exactly once: it can be
 *     neither taken twice nor released twice, and a dead holder's references are found
 *     by its peer index alone. The owner hands out {@code IN_FLIGHT | tag << 32}; a claim
 *     CASes {@code IN_FLIGHT | tag << 32} to {@code HELD(peer) | tag << 32} with the tag
 *     computed from the descriptor received, so a genuine token presented with another
 *     block's range is refused; every later transition compares the low 32 bits and keeps
 *     the tag.</li>
 * </ul>
 *
 * <p>The layout and every token transition are specified in
 * {@code docs/protocol.md}, section 8: the reference for every implementation.
 */
public final class CounterFileLayout {
    public static final long MAGIC = 0x31544E554F435352L; // "RSCOUNT1" little-endian
    public static final int VERSION = 2;

    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long HEADER_LENGTH_OFFSET = 12;
    public static final long OWNER_PID_OFFSET = 16;
    public static final long OWNER_START_OFFSET = 24;
    public static final long SLOT_CAPACITY_OFFSET = 32;
    public static final long PEER_CAPACITY_OFFSET = 36;
    public static final long HANDED_OUT_OFFSET = 40;
    public static final long FLAGS_OFFSET = 48;
    public static final long RELEASES_OFFSET = 64;
    public static final long COLLECTOR_WAITING_OFFSET = 72;
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

    /** The low 32 bits of a HELD word: state and holder, no tag. */
    public static long held(int peer) {
        return HELD | ((long) (peer + 1) << 8);
    }

    /** A whole slot word: {@code low} (state and holder) under {@code tag}. */
    public static long word(long low, int tag) {
        return ((long) tag << 32) | (low & LOW_MASK);
    }

    /** The low 32 bits of a slot word: state and holder. */
    public static long low(long word) {
        return word & LOW_MASK;
    }

    /** The range tag of a slot word. */
    public static int tag(long word) {
        return (int) (word >>> 32);
    }

    public static int state(long word) {
        return (int) (word & 0xFF);
    }

    /** The holder's peer index of a HELD word, or -1. */
    public static int holder(long word) {
        return state(word) == HELD ? (int) ((word >>> 8) & 0xFF_FFFF) - 1 : -1;
    }

    private static final long LOW_MASK = 0xFFFF_FFFFL;
}
