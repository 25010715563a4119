package io.refshare.wire;

import io.refshare.shm.ProcessIdentity;
import io.refshare.tensor.TensorLayout;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;

/**
 * What a message carries to share one block: where the memory is (a segment and a byte
 * range in it), which shared counter keeps it alive, how to order device work after the
 * producer's, optionally how to read it as a tensor, and who sent it. A descriptor is only
 * a description: it holds no mapping and no count. {@link DescriptorCodec} turns it into
 * bytes and back.
 *
 * <p>Every descriptor that exists is consistent (checked here, so that an encoded
 * descriptor always decodes): the byte range lies within the segment without overflow,
 * names follow the wire name rule (1 to 128 characters of {@code [A-Za-z0-9_-]}), the
 * slot is not negative, a CUDA block carries exactly {@value #MEMORY_HANDLE_BYTES} bytes of
 * memory handle and a HOST block none, the event handle is empty or exactly
 * {@value #EVENT_HANDLE_BYTES} bytes and only on a CUDA block, and the tensor (if any) fits
 * in the block.
 *
 * @param backend          where the memory lives
 * @param segmentName      the segment the block is carved from (a file name for HOST; for
 *                         CUDA an identifier of the allocation, for logs and tools: the
 *                         memory handle is what opens it)
 * @param segmentSize      size of that segment in bytes; the receiver maps it whole, once
 * @param offset           byte offset of the block in the segment
 * @param length           byte length of the block
 * @param memoryHandle     CUDA IPC handle of the segment's allocation ({@code CUipcMemHandle}):
 *                         exactly {@value #MEMORY_HANDLE_BYTES} bytes on CUDA, empty on HOST
 * @param counterFileName  the counter file holding the block's reference count
 * @param slot             index of the counter in that file
 * @param eventHandle      CUDA interprocess event to wait on before use: empty when there is
 *                         none (always on HOST; on CUDA when the producer synchronized instead)
 * @param tensor           how to read the block as a tensor, offsets relative to the block;
 *                         null for a raw block
 * @param senderPid        pid of the sending process, for attribution of in-flight counts
 * @param senderStartTicks start time of the sending process (see {@link ProcessIdentity})
 */
public record Descriptor(
        Backend backend,
        String segmentName,
        long segmentSize,
        long offset,
        long length,
        byte[] memoryHandle,
        String counterFileName,
        int slot,
        byte[] eventHandle,
        TensorLayout tensor,
        long senderPid,
        long senderStartTicks) {

    /** Size of a CUDA interprocess event handle ({@code CUipcEventHandle}). */
    public static final int EVENT_HANDLE_BYTES = 64;
    /** Size of a CUDA interprocess memory handle ({@code CUipcMemHandle}). */
    public static final int MEMORY_HANDLE_BYTES = 64;
    /** Longest file name a descriptor may carry. */
    public static final int MAX_NAME_LENGTH = WireNames.MAX_LENGTH;

    private static final byte[] NO_EVENT = new byte[0];
    private static final byte[] NO_HANDLE = new byte[0];

    /**
     * The last names found valid, so that a descriptor made from another one (the receiver's
     * decode memo moves one to each block of a segment) does not check the same strings
     * again: the checks were most of such a construction. Read and written without
     * synchronization: a string is immutable, so any reference a thread finds here was checked.
     */
    private static String checkedSegmentName;
    private static String checkedCounterFileName;

    /**
     * @throws IllegalArgumentException when the fields are inconsistent (see the class comment)
     */
    public Descriptor {
        Objects.requireNonNull(backend, "backend");
        Objects.requireNonNull(memoryHandle, "memoryHandle (use an empty array for a HOST block)");
        Objects.requireNonNull(eventHandle, "eventHandle (use an empty array for none)");
        // null is checked (and refused) however the caches start
        if (segmentName == null || segmentName != checkedSegmentName) {
            checkName("segment name", segmentName);
            checkedSegmentName = segmentName;
        }
        if (counterFileName == null || counterFileName != checkedCounterFileName) {
            checkName("counter file name", counterFileName);
            checkedCounterFileName = counterFileName;
        }
        if (segmentSize <= 0) {
            throw new IllegalArgumentException("segment size must be positive: " + segmentSize);
        }
        if (offset < 0) {
            throw new IllegalArgumentException("offset is negative: " + offset);
        }
        if (length < 0) {
            throw new IllegalArgumentException("length is negative: " + length);
        }
        // written as a subtraction so that offset + length cannot overflow
        if (offset > segmentSize || length > segmentSize - offset) {
            throw new IllegalArgumentException("block [offset " + offset + ", length " + length
                    + ") does not lie within the segment size " + segmentSize);
        }
        if (slot < 0) {
            throw new IllegalArgumentException("slot is negative: " + slot);
        }
        if (backend == Backend.CUDA && memoryHandle.length != MEMORY_HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA block needs a " + MEMORY_HANDLE_BYTES
                    + "-byte memory handle, was " + memoryHandle.length + " bytes");
        }
        if (backend != Backend.CUDA && memoryHandle.length != 0) {
            throw new IllegalArgumentException("memory handle on a " + backend + " block: only CUDA blocks carry one");
        }
        memoryHandle = memoryHandle.length == 0 ? NO_HANDLE : memoryHandle.clone();
        if (eventHandle.length != 0 && eventHandle.length != EVENT_HANDLE_BYTES) {
            throw new IllegalArgumentException("event handle must be empty or " + EVENT_HANDLE_BYTES
                    + " bytes, was " + eventHandle.length);
        }
        if (eventHandle.length != 0 && backend != Backend.CUDA) {
            throw new IllegalArgumentException("event handle on a " + backend + " block: only CUDA blocks carry one");
        }
        eventHandle = eventHandle.length == 0 ? NO_EVENT : eventHandle.clone();
        if (tensor != null && tensor.byteSpan() > length) {
            throw new IllegalArgumentException("tensor " + tensor + " needs " + tensor.byteSpan()
                    + " bytes but the block length is " + length);
        }
        if (senderPid <= 0) {
            throw new IllegalArgumentException("sender pid must be positive: " + senderPid);
        }
        if (senderStartTicks < 0) {
            throw new IllegalArgumentException("sender start ticks is negative: " + senderStartTicks);
        }
    }

    /**
     * A descriptor without a memory handle, as every HOST block is: the canonical
     * constructor with an empty {@code memoryHandle}.
     */
    public Descriptor(Backend backend, String segmentName, long segmentSize, long offset, long length,
                      String counterFileName, int slot, byte[] eventHandle, TensorLayout tensor, long senderPid,
                      long senderStartTicks) {
        this(backend, segmentName, segmentSize, offset, length, NO_HANDLE, counterFileName, slot, eventHandle, tensor,
                senderPid, senderStartTicks);
    }

    /** This descriptor for another token of the same block ({@code slot} must not be negative). */
    public Descriptor withSlot(int slot) {
        return new Descriptor(backend, segmentName, segmentSize, offset, length, memoryHandle, counterFileName, slot,
                eventHandle, tensor, senderPid, senderStartTicks);
    }

    /** This descriptor for the block of the same length at {@code offset} of the same segment. */
    public Descriptor atOffset(long offset) {
        return new Descriptor(backend, segmentName, segmentSize, offset, length, memoryHandle, counterFileName, slot,
                eventHandle, tensor, senderPid, senderStartTicks);
    }

    /** A host-memory block, sent by {@code sender}; {@code tensor} may be null for a raw block. */
    public static Descriptor host(String segmentName, long segmentSize, long offset, long length,
                                  String counterFileName, int slot, TensorLayout tensor, ProcessIdentity sender) {
        return new Descriptor(Backend.HOST, segmentName, segmentSize, offset, length, NO_HANDLE, counterFileName, slot,
                NO_EVENT, tensor, sender.pid(), sender.startTicks());
    }

    /**
     * A CUDA block: {@code memoryHandle} is the {@value #MEMORY_HANDLE_BYTES}-byte IPC handle
     * of the segment, {@code eventHandle} is empty or {@value #EVENT_HANDLE_BYTES} bytes.
     */
    public static Descriptor cuda(String segmentName, long segmentSize, long offset, long length, byte[] memoryHandle,
                                  String counterFileName, int slot, byte[] eventHandle, TensorLayout tensor,
                                  ProcessIdentity sender) {
        return new Descriptor(Backend.CUDA, segmentName, segmentSize, offset, length, memoryHandle, counterFileName,
                slot, eventHandle, tensor, sender.pid(), sender.startTicks());
    }

    private static void checkName(String what, String name) {
        String problem = WireNames.problem(name);
        if (problem != null) {
            throw new IllegalArgumentException(what + " " + WireNames.quoted(name) + " " + problem);
        }
    }

    /** A copy of the memory handle; empty on a HOST block. */
    @Override
    public byte[] memoryHandle() {
        return memoryHandle.length == 0 ? NO_HANDLE : memoryHandle.clone();
    }

    /** A copy of the event handle; empty when there is none. */
    @Override
    public byte[] eventHandle() {
        return eventHandle.length == 0 ? NO_EVENT : eventHandle.clone();
    }

    public boolean hasEvent() {
        return eventHandle.length != 0;
    }

    /** True when the block carries no tensor layout. */
    public boolean isRawBlock() {
        return tensor == null;
    }

    /** The sending process. */
    public ProcessIdentity sender() {
        return new ProcessIdentity(senderPid, senderStartTicks);
    }

    /** This descriptor with another tensor layout (null for a raw block). */
    public Descriptor withTensor(TensorLayout newTensor) {
        return new Descriptor(backend, segmentName, segmentSize, offset, length, memoryHandle, counterFileName, slot,
                eventHandle, newTensor, senderPid, senderStartTicks);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Descriptor that
                && backend == that.backend
                && segmentSize == that.segmentSize
                && offset == that.offset
                && length == that.length
                && slot == that.slot
                && senderPid == that.senderPid
                && senderStartTicks == that.senderStartTicks
                && segmentName.equals(that.segmentName)
                && counterFileName.equals(that.counterFileName)
                && Arrays.equals(memoryHandle, that.memoryHandle)
                && Arrays.equals(eventHandle, that.eventHandle)
                && Objects.equals(tensor, that.tensor);
    }

    @Override
    public int hashCode() {
        int h = Objects.hash(backend, segmentName, segmentSize, offset, length, counterFileName, slot, tensor,
                senderPid, senderStartTicks);
        return 31 * (31 * h + Arrays.hashCode(memoryHandle)) + Arrays.hashCode(eventHandle);
    }

    @Override
    public String toString() {
        return "Descriptor[" + backend + " " + segmentName + " (" + segmentSize + " bytes) @" + offset + "+" + length
                + (memoryHandle.length == 0 ? "" : ", memory " + HexFormat.of().formatHex(memoryHandle, 0, 8) + "...")
                + ", counter " + counterFileName + "#" + slot
                + (eventHandle.length == 0 ? "" : ", event " + HexFormat.of().formatHex(eventHandle, 0, 8) + "...")
                + (tensor == null ? ", raw" : ", " + tensor)
                + ", from pid " + senderPid + " (start " + senderStartTicks + ")]";
    }
}
