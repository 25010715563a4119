package io.refshare.wire;

import io.refshare.tensor.TensorLayout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
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
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = DescriptorCodec.I32;
    private static final int SLOT = DescriptorCodec.SLOT_OFFSET;
    private static final int SEGMENT_SIZE = SLOT + Integer.BYTES;
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
    /** The copy: {@code size} bytes of encoding, slot 0; none while {@code size} is 0. */
    private MemorySegment copy = MemorySegment.ofArray(new byte[0]);
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
            copy.set(I64, BLOCK_OFFSET, offset);
        }
        Objects.checkFromIndexSize(at, size, dst.byteSize());
        // the header's first words, the slot, then the rest where it differs
        writeWord(dst, at, 0);
        writeWord(dst, at, Long.BYTES);
        if (dst.get(I32, at + 2 * Long.BYTES) != copy.get(I32, 2 * Long.BYTES)) {
            dst.set(I32, at + 2 * Long.BYTES, copy.get(I32, 2 * Long.BYTES));
        }
        if (dst.get(I32, at + SLOT) != slot) {
            dst.set(I32, at + SLOT, slot);
        }
        // the segment's size and the block's offset (which a fresh block of the segment changes) by value
        writeWord(dst, at, SEGMENT_SIZE);
        writeWord(dst, at, BLOCK_OFFSET);
        long first = MemorySegment.mismatch(copy, AFTER_OFFSET, size, dst, at + AFTER_OFFSET, at + size);
        if (first >= 0) {
            int word = AFTER_OFFSET + (int) (first & ~(Long.BYTES - 1));
            for (; word + Long.BYTES <= size; word += Long.BYTES) {
                writeWord(dst, at, word);
            }
            if (word < size) {
                writeWord(dst, at, size - Long.BYTES); // the last word overlaps the one before
            }
        }
        return size;
    }

    private void writeWord(MemorySegment dst, long at, int word) {
        long v = copy.get(I64, word);
        if (dst.get(I64, at + word) != v) {
            dst.set(I64, at + word, v);
        }
    }

    private void remember(byte[] segmentName, long segmentSize, long offset, long length, byte[] counterFileName,
                          TensorLayout tensor, long senderPid, long senderStartTicks) {
        size = 0; // no copy while it is being made: a failed encoding leaves none
        int needed = DescriptorCodec.encodedHostSize(segmentName.length, counterFileName.length, tensor);
        if (copy.byteSize() < needed) {
            copy = MemorySegment.ofArray(new byte[needed]);
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
