package io.refshare.holder;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.LittleEndian;
import io.refshare.shm.ProcessIdentity;
import io.refshare.wire.DescriptorCodec;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The layout of a shared holder file, described once. Little-endian; every field another
 * process updates is a naturally aligned 64-bit word changed only by atomic operations.
 *
 * <pre>
 * Header, read-mostly line (the first 32 bytes are the common {@link io.refshare.shm.FileHeader}):
 *   0                   8         12        16                  24                  32
 *   +-------------------+---------+---------+-------------------+-------------------+
 *   | magic "RSHOLDR1"  | version | hdrLen  |     owner pid     | owner start ticks |
 *   +---------+---------+---------+---------+-------------------+-------------------+
 *   | slotCap | readCap | slotLen | readLen |        (0)        |        (0)        |
 *   +---------+---------+---------+---------+-------------------+-------------------+ 64
 * The holder word, alone on its line (every acquire adds to it):
 *   | holder word (8), see HolderWord                                ... (0) to 128 |
 *   +-------------------------------------------------------------------------------+ 128
 * Statistics and state, written once per publish or version death:
 *   | published (8) | retired (8) | closed (8) | reclaimed (8)       ... (0) to 192 |
 *   +-------------------------------------------------------------------------------+ 192 = hdrLen
 * Reader table, readCap rows of readLen = 8 + 8 * slotCap bytes rounded up to 64:
 *   +--------------+-------------+-------------+-- ... --+----------------------+
 *   | identity (8) | held[0] (8) | held[1] (8) |   ...   | held[slotCap-1] (8)  |
 *   +--------------+-------------+-------------+-- ... --+----------------------+
 *    identity: pid in bits 0..21, start ticks in bits 22..62, 0 = free row; bit 63 set:
 *      the row's process died and the process named in bits 0..62 is reclaiming it
 *    held[s]: references this process holds on the version in slot s
 * Version slots, slotCap entries of slotLen = 1152 bytes:
 *   +--------------------------------------------------------------------------------+
 *   | count (8), the version's own count                             ... (0) to 64  |
 *   +-----------+--------------+---------------+-----------+-----+-------------------+
 *   | state (8) | sequence (8) | publisher (8) | descLen (4)| (0) | (0) ... to 128   |
 *   +-----------+--------------+---------------+-----------+-----+-------------------+
 *   | descriptor: descLen bytes of DescriptorCodec encoding, at most 1024            |
 *   +--------------------------------------------------------------------------------+
 *    state: bits 0..7 FREE 0 / WRITING 1 / LIVE 2, bits 8..31 the slot's generation
 *    sequence: number of the publish that installed this version (1, 2, ...)
 *    publisher: identity (packed as in the reader table) of the process that published it
 * </pre>
 *
 * <ul>
 * <li><b>published</b>, <b>retired</b>: versions installed, and versions whose last
 *     reference went (their token was returned); equal once the holder is closed and every
 *     reader let go. <b>reclaimed</b>: references given back on behalf of dead readers.</li>
 * <li><b>closed</b>: non-zero once the creator closed the holder; nobody publishes after.</li>
 * <li><b>count</b>: the version's own count: 2<sup>62</sup> ("pinned"), minus releases, plus
 *     drained acquisitions, while the holder word names the version; the references still
 *     out once the holder moved on and transferred its external count (the protocol is in
 *     {@code HolderFile}). On a line of its own: every reader's release writes it.</li>
 * </ul>
 *
 * <p>The layout and the holder protocol are specified in
 * {@code docs/protocol.md}, section 10: the reference for every implementation.
 */
public final class SharedHolderLayout {
    public static final long MAGIC = 0x3152444C4F485352L; // "RSHOLDR1" read little-endian
    public static final int VERSION = 1;

    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long HEADER_LENGTH_OFFSET = 12;
    public static final long OWNER_PID_OFFSET = 16;
    public static final long OWNER_START_OFFSET = 24;
    public static final long SLOT_CAPACITY_OFFSET = 32;
    public static final long READER_CAPACITY_OFFSET = 36;
    public static final long SLOT_LENGTH_OFFSET = 40;
    public static final long READER_LENGTH_OFFSET = 44;
    public static final long WORD_OFFSET = 64;
    public static final long PUBLISHED_OFFSET = 128;
    public static final long RETIRED_OFFSET = 136;
    public static final long CLOSED_OFFSET = 144;
    public static final long RECLAIMED_OFFSET = 152;
    public static final int HEADER_LENGTH = 192;

    public static final long ROW_IDENTITY = 0;
    public static final long ROW_HELD = 8;

    public static final long SLOT_COUNT = 0;
    public static final long SLOT_STATE = 64;
    public static final long SLOT_SEQUENCE = 72;
    public static final long SLOT_PUBLISHER = 80;
    public static final long SLOT_DESCRIPTOR_LENGTH = 88;
    public static final long SLOT_DESCRIPTOR = 128;
    public static final int MAX_DESCRIPTOR_BYTES = DescriptorCodec.MAX_ENCODED_BYTES;
    public static final int SLOT_LENGTH = (int) SLOT_DESCRIPTOR + MAX_DESCRIPTOR_BYTES;

    public static final int FREE = 0;
    public static final int WRITING = 1;
    public static final int LIVE = 2;

    public static final int DEFAULT_SLOTS = 64;
    public static final int MAX_SLOTS = 4096;
    public static final int DEFAULT_READERS = 64;
    public static final int MAX_READERS = 1 << 16;

    static final VarHandle LONG = LittleEndian.ATOMIC_LONG;
    static final ValueLayout.OfInt LE_INT = LittleEndian.INT;
    static final ValueLayout.OfLong LE_LONG = LittleEndian.LONG;

    static final long RECLAIM_MARK = 1L << 63;
    private static final int STATE_BITS = 8;
    private static final int STATE_MASK = (1 << STATE_BITS) - 1;

    private SharedHolderLayout() {
    }

    /** Where the parts of a file with these capacities lie. */
    public record Geometry(int slotCapacity, int readerCapacity) {
        public Geometry {
            if (slotCapacity < 1 || slotCapacity > MAX_SLOTS) {
                throw new IllegalArgumentException("version slots must be in 1.." + MAX_SLOTS + ": " + slotCapacity);
            }
            if (readerCapacity < 1 || readerCapacity > MAX_READERS) {
                throw new IllegalArgumentException("reader rows must be in 1.." + MAX_READERS + ": " + readerCapacity);
            }
        }

        public int readerLength() {
            return (int) roundUp(ROW_HELD + 8L * slotCapacity);
        }

        public long rowOffset(int row) {
            return HEADER_LENGTH + (long) row * readerLength();
        }

        public long heldOffset(int row, int slot) {
            return rowOffset(row) + ROW_HELD + 8L * slot;
        }

        public long slotOffset(int slot) {
            return HEADER_LENGTH + (long) readerCapacity * readerLength() + (long) slot * SLOT_LENGTH;
        }

        public long fileLength() {
            return slotOffset(slotCapacity);
        }
    }

    /** The geometry a file's header states, checked against the file's size; throws on anything malformed. */
    public static Geometry readGeometry(MemorySegment m, String where) {
        FileHeader.check(m, MAGIC, VERSION, "holder file", where);
        int headerLength = m.get(LE_INT, HEADER_LENGTH_OFFSET);
        int slots = m.get(LE_INT, SLOT_CAPACITY_OFFSET);
        int readers = m.get(LE_INT, READER_CAPACITY_OFFSET);
        int slotLength = m.get(LE_INT, SLOT_LENGTH_OFFSET);
        int readerLength = m.get(LE_INT, READER_LENGTH_OFFSET);
        if (headerLength != HEADER_LENGTH || slots < 1 || slots > MAX_SLOTS || readers < 1 || readers > MAX_READERS
                || slotLength != SLOT_LENGTH) {
            throw new InvalidDataException(where + " has a corrupt header: header length " + headerLength + ", "
                    + slots + " slots of " + slotLength + " bytes, " + readers + " reader rows");
        }
        Geometry g = new Geometry(slots, readers);
        if (readerLength != g.readerLength()) {
            throw new InvalidDataException(where + " has a corrupt header: reader rows of " + readerLength
                    + " bytes, " + g.readerLength() + " expected for " + slots + " slots");
        }
        if (m.byteSize() != g.fileLength()) {
            throw new InvalidDataException(where + " is " + m.byteSize() + " bytes but its header describes "
                    + g.fileLength() + " (truncated or corrupt)");
        }
        return g;
    }

    /** Writes the header of a new (zero-filled) file; the magic goes last. */
    public static void format(MemorySegment m, Geometry g, ProcessIdentity owner) {
        FileHeader.write(m, VERSION, HEADER_LENGTH, owner);
        m.set(LE_INT, SLOT_CAPACITY_OFFSET, g.slotCapacity());
        m.set(LE_INT, READER_CAPACITY_OFFSET, g.readerCapacity());
        m.set(LE_INT, SLOT_LENGTH_OFFSET, SLOT_LENGTH);
        m.set(LE_INT, READER_LENGTH_OFFSET, g.readerLength());
        FileHeader.publish(m, MAGIC);
    }

    static long state(int state, int generation) {
        return state | ((long) (generation & HolderWord.GENERATION_MASK) << STATE_BITS);
    }

    static int stateOf(long stateWord) {
        return (int) (stateWord & STATE_MASK);
    }

    static int generationOf(long stateWord) {
        return (int) (stateWord >>> STATE_BITS) & HolderWord.GENERATION_MASK;
    }

    private static long roundUp(long n) {
        return (n + 63) & ~63L;
    }
}
