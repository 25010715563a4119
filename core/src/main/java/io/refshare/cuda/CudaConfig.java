package io.refshare.cuda;

/**
 * How a process uses CUDA (part of {@link io.refshare.RefshareConfig}). The driver library
 * itself is chosen per process: see {@link CudaDriver#system()}.
 *
 * @param device        ordinal of the CUDA device this process allocates on and opens received
 *                      device memory on (default 0)
 * @param maxLiveEvents most interprocess events alive at once (default
 *                      {@value #DEFAULT_MAX_LIVE_EVENTS}, as PyTorch): one is kept per shared
 *                      storage until it is freed; a send that would need one more synchronizes
 *                      the stream instead. 0 always synchronizes.
 */
public record CudaConfig(int device, int maxLiveEvents) {
    public static final int DEFAULT_MAX_LIVE_EVENTS = 1_000;

    public CudaConfig {
        if (device < 0) {
            throw new IllegalArgumentException("CUDA device ordinal must not be negative: " + device);
        }
        if (maxLiveEvents < 0) {
            throw new IllegalArgumentException("maxLiveEvents must not be negative: " + maxLiveEvents);
        }
    }

    public static CudaConfig defaults() {
        return new CudaConfig(0, DEFAULT_MAX_LIVE_EVENTS);
    }

    public CudaConfig withDevice(int ordinal) {
        return new CudaConfig(ordinal, maxLiveEvents);
    }

    public CudaConfig withMaxLiveEvents(int max) {
        return new CudaConfig(device, max);
    }
}
