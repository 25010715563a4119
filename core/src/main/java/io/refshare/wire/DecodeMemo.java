package io.refshare.wire;

import io.refshare.exceptions.InvalidDataException;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * {@link DescriptorCodec#decode(byte[])} for one receiver, remembering what it decoded. A
 * process receives tokens of the same few blocks again and again (a producer's pool reuses its
 * blocks), and their encodings differ only in the slot: an entry is keyed by the exact bytes
 * with the slot left out, so a hit answers exactly what {@code decode} would (the same fields,
 * this message's slot) without parsing and checking everything again, and without allocating
 * the names and the layout again.
 *
 * <p>Thread-safe without locks: a table of immutable entries, each a private copy of the bytes
 * it was decoded from and its descriptor, published by a plain array store (the entry's fields
 * are final); a racing reader sees either entry whole. Bounded: {@value #ENTRIES} entries, a
 * new one replaces whatever shared its bucket.
 */
public final class DecodeMemo {
    static final int ENTRIES = 256;
    private static final int SLOT_AT = 20;
    private static final int SLOT_END = SLOT_AT + Integer.BYTES;
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private record Entry(byte[] bytes, Descriptor descriptor) {
    }

    private final Entry[] entries = new Entry[ENTRIES];

    /**
     * Decodes {@code bytes} as {@link DescriptorCodec#decode(byte[])} does.
     *
     * @throws InvalidDataException when the bytes are not exactly one valid encoding
     */
    public Descriptor decode(byte[] bytes) {
        if (bytes.length < DescriptorCodec.HEADER_BYTES || bytes.length > DescriptorCodec.MAX_ENCODED_BYTES) {
            return DescriptorCodec.decode(bytes); // its answer, whatever it is
        }
        int bucket = bucket(bytes);
        Entry e = entries[bucket];
        if (e != null && sameButSlot(e.bytes, bytes)) {
            int slot = (int) INT.get(bytes, SLOT_AT);
            if (slot >= 0) {
                return e.descriptor.withSlot(slot);
            }
        }
        byte[] copy = bytes.clone(); // what the entry says is exactly what was decoded, whatever the caller does next
        Descriptor d = DescriptorCodec.decode(copy);
        entries[bucket] = new Entry(copy, d);
        return d;
    }

    /** A bucket from the fields that tell blocks apart: where the block is, and the first name bytes. */
    private static int bucket(byte[] b) {
        long h = (long) LONG.get(b, 24) * 31 + (long) LONG.get(b, 32);
        h = h * 31 + (long) LONG.get(b, 40);
        h = h * 31 + (long) LONG.get(b, b.length - Long.BYTES);
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        return (int) (h ^ (h >>> 32)) & (ENTRIES - 1);
    }

    private static boolean sameButSlot(byte[] known, byte[] b) {
        return known.length == b.length
                && Arrays.equals(known, 0, SLOT_AT, b, 0, SLOT_AT)
                && Arrays.equals(known, SLOT_END, known.length, b, SLOT_END, b.length);
    }
}
