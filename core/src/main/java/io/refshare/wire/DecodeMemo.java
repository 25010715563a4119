package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.refshare.wire.DescriptorCodec.I64;

/**
 * {@link DescriptorCodec#decode} for one receiver, remembering what it decoded. A process
 * receives tokens of the same few blocks again and again (a producer's pool reuses its
 * blocks), and their encodings differ only in the slot; blocks of one segment and one size
 * (fresh tensors from a pool) differ only in the slot and the block offset. So an entry holds
 * a private copy of the bytes it was decoded from and its descriptor, and it answers any
 * encoding equal to its bytes but for the slot and the offset:
 * <ul>
 * <li>with its own descriptor when the offset is the descriptor's too, allocating nothing
 *     (a block sent again);</li>
 * <li>else with that descriptor moved to the new offset, once the offset is checked as
 *     {@code decode} checks it (another block of the segment: one descriptor object, no
 *     parsing, no names, no layout).</li>
 * </ul>
 * Entries are found by two tables: one by the block (hashed with its offset), one by the
 * segment (hashed without), so a pool cycling through more blocks than the first table holds
 * still finds its segment in the second. Streaming fresh 1 KiB tensors to eight consumers
 * cycled through thousands of blocks, and every message was decoded in full (a quarter of a
 * consumer's time, 650 bytes of garbage each). The segment table is as large as the receive
 * cache's bound on idle mappings, since a pool of 1 MiB blocks spans hundreds of 4 MiB
 * segments. (A measurement once credited that size with 540-700k against 770-800k tensors/s
 * for eight consumers of such a pool; it was taken while the hash could not tell segments of
 * one size apart, so all of them shared one bucket whatever the size.)
 *
 * <p>{@link #decodeBlock} answers the descriptor of the block, whose slot is that of the first
 * message of its segment seen; the message's own slot is read apart
 * ({@link DescriptorCodec#slot}), so that a hit needs no new descriptor. It reads the source in
 * place, shared memory included: on a hit every byte but the slot and the offset was compared
 * with the entry's private copy, the offset was read once and checked, and the answer is built
 * from what was checked when the entry was decoded, so a writer racing the comparison can at
 * worst turn a hit into a miss or make the comparison pass on bytes it then changes, and the
 * answer is a valid descriptor either way; on a miss the source is copied once before it is
 * read, as {@code decode} does.
 *
 * <p>Thread-safe without locks: tables of immutable entries, published by plain array stores
 * (the entry's fields are final); a racing reader sees either entry whole. Bounded:
 * {@value #BLOCKS} block entries and {@value #SEGMENTS} segment entries, a new one replaces
 * whatever shared its bucket.
 */
public final class DecodeMemo {
    static final int BLOCKS = 256;
    static final int SEGMENTS = 1024;
    private static final int SLOT_AT = DescriptorCodec.SLOT_OFFSET;
    private static final int SLOT_END = SLOT_AT + Integer.BYTES;
    private static final int OFFSET_AT = DescriptorCodec.BLOCK_OFFSET_OFFSET;
    private static final int OFFSET_END = OFFSET_AT + Long.BYTES;
    private static final int COUNTER_NAME_LENGTH_AT = DescriptorCodec.COUNTER_NAME_LENGTH_OFFSET;

    /** What {@code bytes} decoded to, or (the same bytes but the offset) that moved to another offset. */
    private record Entry(MemorySegment bytes, Descriptor descriptor) {
    }

    private final Entry[] blocks = new Entry[BLOCKS];
    private final Entry[] segments = new Entry[SEGMENTS];

    /**
     * The descriptor {@link DescriptorCodec#decode(MemorySegment, long, long)} answers for the
     * {@code length} bytes at {@code offset} of {@code src}, but for its slot, which may be that
     * of another message of the same segment: read the message's slot with
     * {@link DescriptorCodec#slot}.
     *
     * @throws InvalidDataException when the bytes are not exactly one valid encoding
     */
    public Descriptor decodeBlock(MemorySegment src, long offset, int length) {
        if (length < DescriptorCodec.HEADER_BYTES || length > DescriptorCodec.MAX_ENCODED_BYTES
                || src.get(DescriptorCodec.I32, offset + SLOT_AT) < 0) {
            return DescriptorCodec.decode(src, offset, length); // its answer, whatever it is
        }
        long segmentHash = segmentHash(src, offset, length);
        long blockOffset = src.get(I64, offset + OFFSET_AT);
        int blockBucket = bucket(segmentHash * 31 + blockOffset, BLOCKS);
        Entry e = blocks[blockBucket];
        if (e != null && e.descriptor.offset() == blockOffset && sameButSlotAndOffset(e.bytes, src, offset, length)) {
            return e.descriptor;
        }
        int segmentBucket = bucket(segmentHash, SEGMENTS);
        e = segments[segmentBucket];
        if (e != null && fitsTheSegment(e.descriptor, blockOffset) && sameButSlotAndOffset(e.bytes, src, offset, length)) {
            Descriptor d = e.descriptor.atOffset(blockOffset);
            blocks[blockBucket] = new Entry(e.bytes, d);
            return d;
        }
        // what the entry says is exactly what was decoded, whatever the source holds next
        MemorySegment copy = MemorySegment.ofArray(src.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE));
        Descriptor d = DescriptorCodec.decode(copy, 0, length);
        e = new Entry(copy, d);
        blocks[blockBucket] = e;
        segments[segmentBucket] = e;
        return d;
    }

    /**
     * A hash of the fields that tell segments and block sizes apart: the segment's size, the
     * block's length, and the last eight bytes of each name (the counter file's name ends the
     * encoding, the segment's comes right before it). The segment name's random tail is what
     * tells apart the many segments of one size a pool of large blocks spans; without it they
     * all took turns in one bucket of each table and every message was parsed again. Read from
     * unchecked bytes, so the segment name's place is clamped into the message: a hash only.
     */
    private static long segmentHash(MemorySegment src, long offset, int length) {
        long h = src.get(I64, offset + 24) * 31 + src.get(I64, offset + 40);
        h = h * 31 + src.get(I64, offset + length - Long.BYTES);
        int counterNameLength = src.get(ValueLayout.JAVA_BYTE, offset + COUNTER_NAME_LENGTH_AT) & 0xFF;
        return h * 31 + src.get(I64, offset + Math.max(0, length - counterNameLength - Long.BYTES));
    }

    private static int bucket(long h, int buckets) {
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        return (int) (h ^ (h >>> 32)) & (buckets - 1);
    }

    /** Whether a block of {@code known}'s length at {@code blockOffset} lies within its segment, as decoding requires. */
    private static boolean fitsTheSegment(Descriptor known, long blockOffset) {
        return blockOffset >= 0 && blockOffset <= known.segmentSize() && known.length() <= known.segmentSize() - blockOffset;
    }

    private static boolean sameButSlotAndOffset(MemorySegment known, MemorySegment src, long offset, int length) {
        // the header's first words by value (a bulk comparison's set-up costs more than they do), the rest in bulk
        return known.byteSize() == length
                && known.get(I64, 0) == src.get(I64, offset)
                && known.get(I64, Long.BYTES) == src.get(I64, offset + Long.BYTES)
                && known.get(DescriptorCodec.I32, 2 * Long.BYTES) == src.get(DescriptorCodec.I32, offset + 2 * Long.BYTES)
                && known.get(I64, SLOT_END) == src.get(I64, offset + SLOT_END)
                && MemorySegment.mismatch(known, OFFSET_END, length, src, offset + OFFSET_END, offset + length) < 0;
    }
}
