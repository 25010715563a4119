package io.refshare.share;

import io.refshare.memory.CachingAllocator;
import io.refshare.memory.Segment;
import io.refshare.wire.Descriptor;

/**
 * The device half of a {@link Sharing}: what the engine asks of a device backend (CUDA) at
 * the few points where device memory differs from host memory. It sits behind this
 * interface so that the host path never loads a driver: {@link Sharing} creates it on first
 * use through the factory it was given ({@code io.refshare.cuda.driver.CudaSharing} implements it).
 *
 * <p>Tokens, the limbo and collection stay in {@link Sharing} and work the same for both
 * kinds of memory; only allocation, ordering and mapping differ.
 */
public interface DeviceSharing extends AutoCloseable {

    /** The allocator of device blocks; its miss handler collects the limbo, like the host one's. */
    CachingAllocator allocator();

    /** The device address, in this process, of the start of a segment of {@link #allocator()}. */
    long address(Segment segment);

    /** The IPC handle another process opens a segment of {@link #allocator()} with. */
    byte[] memoryHandle(Segment segment);

    /**
     * Orders a receiver after the device work this process has queued so far, for one send
     * of {@code storage}: records an interprocess event and returns its handle, or (over the
     * live-event cap) synchronizes and returns an empty array. Called before the send's
     * token is handed out, so a failure here leaves no count behind.
     */
    byte[] orderForSend(Storage storage);

    /** {@code storage} is freed for good: whatever {@link #orderForSend} kept for it goes. */
    void disposed(Storage storage);

    /**
     * The device segment {@code d} names, opened in this process (once, however many of its
     * blocks arrive; a segment of this process is used directly), with one more user. Returns
     * once the device work its sender recorded in {@code d}'s event is done, and fails if the
     * sender dies first (the caller gives the token back).
     */
    ReceivedSegment open(Descriptor d);

    /**
     * Drops one user of a segment from {@link #open}; the last one closes it. Called before
     * the block's token goes back, since its sender may free the memory as soon as it has.
     */
    void release(ReceivedSegment segment);

    /** Closes everything device-side; later calls to {@link #disposed} and {@link #release} do nothing. */
    @Override
    void close();
}
