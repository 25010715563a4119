package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * {@link DescriptorCodec#decode} for one receiver, remembering what it decoded. A process
 * receives tokens of the same few blocks again and again (a producer's pool reuses its
 * blocks), and their encodings differ only in the slot: an entry is keyed by the exact bytes
 * with the slot left out, so a hit answers what {@code decode} would, without parsing and
 * checking everything again and without allocating anything.
 *
 * <p>{@link #decodeBlock} answers the descriptor of the block, whose slot is that of the first
 * message of the block seen; the message's own slot is read apart
 * ({@link DescriptorCodec#slot}), so that a hit needs no new descriptor. It reads the source in
 * place, shared memory included: on a hit every byte but the slot was compared with the
 * entry's private copy and the answer is that copy's descriptor, checked when it was decoded,
 * so a writer racing the comparison can at worst turn a hit into a miss or make the
 * comparison pass on bytes it then changes, and the answer is a valid descriptor either way;
 * on a miss the source is copied once before it is read, as {@code decode} does.
 *
 * <p>Thread-safe without locks: a table of immutable entries, each a private copy of the bytes
 * it was decoded from and its descriptor, published by a plain array store (the entry's fields
 * are final); a racing reader sees either entry whole. Bounded: {@value #ENTRIES} entries, a
 * new one replaces whatever shared its bucket.
 */
public final class DecodeMemo {
    static final int ENTRIES = 256;
    private static final int SLOT_AT = DescriptorCodec.SLOT_OFFSET;
    private static final int SLOT_END = SLOT_AT + Integer.BYTES;
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private record Entry(MemorySegment bytes, Descriptor descriptor) {
    }

    private final Entry[] entries = new Entry[ENTRIES];

    /**
     * The descriptor {@link DescriptorCodec#decode(MemorySegment, long, long)} answers for the
     * {@code length} bytes at {@code offset} of {@code src}, but for its slot, which may be that
     * of another message of the same block: read the message's slot with
     * {@link DescriptorCodec#slot}.
     *
     * @throws InvalidDataException when the bytes are not exactly one valid encoding
     */
    public Descriptor decodeBlock(MemorySegment src, long offset, int length) {
        if (length < DescriptorCodec.HEADER_BYTES || length > DescriptorCodec.MAX_ENCODED_BYTES) {
            return DescriptorCodec.decode(src, offset, length); // its answer, whatever it is
        }
        int bucket = bucket(src, offset, length);
        Entry e = entries[bucket];
        if (e != null && sameButSlot(e.bytes, src, offset, length)
                && src.get(DescriptorCodec.I32, offset + SLOT_AT) >= 0) {
            return e.descriptor;
        }
        // what the entry says is exactly what was decoded, whatever the source holds next
        MemorySegment copy = MemorySegment.ofArray(src.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE));
        Descriptor d = DescriptorCodec.decode(copy, 0, length);
        entries[bucket] = new Entry(copy, d);
        return d;
    }

    /** A bucket from the fields that tell blocks apart: where the block is, and the last name bytes. */
    private static int bucket(MemorySegment src, long offset, int length) {
        long h = src.get(I64, offset + 24) * 31 + src.get(I64, offset + 32);
        h = h * 31 + src.get(I64, offset + 40);
        h = h * 31 + src.get(I64, offset + length - Long.BYTES);
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        return (int) (h ^ (h >>> 32)) & (ENTRIES - 1);
    }

    private static boolean sameButSlot(MemorySegment known, MemorySegment src, long offset, int length) {
        return known.byteSize() == length
                && MemorySegment.mismatch(known, 0, SLOT_AT, src, offset, offset + SLOT_AT) < 0
                && MemorySegment.mismatch(known, SLOT_END, length, src, offset + SLOT_END, offset + length) < 0;
    }
}
