package io.refshare.wire;

import io.refshare.tensor.TensorLayout;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * Writes host descriptors as {@link DescriptorCodec#encodeHost} does, from a copy of the last
 * one it wrote. A sender streams message after message of one block, or of blocks of one
 * segment and one shape; such messages differ from the last in the slot, and at most in the
 * block offset. So the copy is kept with the fields it was encoded from (the names by identity:
 * a segment and a counter file each hand out one object; the layout by identity or, failing
 * that, by value, since every view makes a new one), and a message of the same fields is the
 * copy with its slot. The header's first 40 bytes (up to the block's offset) are compared
 * with the cell's word by word, and the rest (length, sender, shape, strides, names) by one
 * vectorized comparison, instead of a read and a comparison per field. Bytes equal to the
 * cell's are left alone, as {@code encodeHost} leaves them (their cache lines stay clean for
 * the consumer that reads the cell next).
 *
 * <p>Not thread-safe: each thread that puts has its own (its copy as long as the longest
 * descriptor it wrote, a couple of hundred bytes for a small tensor: a virtual thread per
 * request pays that once), and a batch's messages, written one after another, share their
 * batch's.
 */
public final class HostEncoder {
    private static final int BLOCK_OFFSET = DescriptorCodec.BLOCK_OFFSET_OFFSET;
    private static final int AFTER_OFFSET = BLOCK_OFFSET + Long.BYTES;

    // the fields the copy was encoded from
    private byte[] segmentName;
    private long segmentSize;
    private long offset;
    private long length;
    private byte[] counterFileName;
    private TensorLayout tensor;
    private long senderPid;
    private long senderStartTicks;
    /** The copy: {@code size} bytes of encoding, with the last message's slot; none while {@code size} is 0. */
    private byte[] bytes = new byte[0];
    /** {@link #bytes} as a segment. */
    private MemorySegment copy = MemorySegment.ofArray(bytes);
    private int size;

    /**
     * Writes what {@link DescriptorCodec#encodeHost} writes for these fields, at {@code at} of
     * {@code dst}, and returns its size.
     *
     * @throws IndexOutOfBoundsException when it does not fit; nothing is written then
     */
    public int write(byte[] segmentName, long segmentSize, long offset, long length, byte[] counterFileName,
                     int slot, TensorLayout tensor, long senderPid, long senderStartTicks, MemorySegment dst, long at) {
        if (size == 0 || segmentName != this.segmentName || counterFileName != this.counterFileName
                || segmentSize != this.segmentSize || length != this.length || senderPid != this.senderPid
                || senderStartTicks != this.senderStartTicks
                || (tensor != this.tensor && !Objects.equals(tensor, this.tensor))) { // a view's layout is a new object
            remember(segmentName, segmentSize, offset, length, counterFileName, tensor, senderPid, senderStartTicks);
        } else if (offset != this.offset) {
            this.offset = offset; // another block of the same segment and shape
            copy.set(DescriptorCodec.I64, BLOCK_OFFSET, offset);
        }
        Objects.checkFromIndexSize(at, size, dst.byteSize());
        copy.set(DescriptorCodec.I32, DescriptorCodec.SLOT_OFFSET, slot);
        // the header up to the block's offset (which a fresh block of the segment changes) word by word,
        // the rest from the first word that differs
        DescriptorCodec.putBytes(dst, at, bytes, 0, AFTER_OFFSET);
        long first = MemorySegment.mismatch(copy, AFTER_OFFSET, size, dst, at + AFTER_OFFSET, at + size);
        if (first >= 0) {
            int from = AFTER_OFFSET + (int) (first & ~(Long.BYTES - 1));
            DescriptorCodec.putBytes(dst, at + from, bytes, from, size - from);
        }
        return size;
    }

    private void remember(byte[] segmentName, long segmentSize, long offset, long length, byte[] counterFileName,
                          TensorLayout tensor, long senderPid, long senderStartTicks) {
        size = 0; // no copy while it is being made: a failed encoding leaves none
        int needed = DescriptorCodec.encodedHostSize(segmentName.length, counterFileName.length, tensor);
        if (bytes.length < needed) {
            bytes = new byte[needed];
            copy = MemorySegment.ofArray(bytes);
        }
        int encoded = DescriptorCodec.encodeHost(segmentName, segmentSize, offset, length, counterFileName, 0, tensor,
                senderPid, senderStartTicks, copy, 0);
        this.segmentName = segmentName;
        this.segmentSize = segmentSize;
        this.offset = offset;
        this.length = length;
        this.counterFileName = counterFileName;
        this.tensor = tensor;
        this.senderPid = senderPid;
        this.senderStartTicks = senderStartTicks;
        size = encoded;
    }
}
