package io.refshare.cuda;

import io.refshare.cuda.driver.CudaDriver;
/**
 * How a process uses CUDA (part of {@link io.refshare.RefshareConfig}). The driver library
 * itself is chosen per process: {@code libcuda.so.1}, unless the system property
 * {@code refshare.cuda.library} or the environment variable {@code REFSHARE_LIBCUDA} names
 * another (see {@code docs/cuda.md}).
 *
 * @param device        ordinal of the CUDA device this process allocates on and opens received
 *                      device memory on (default 0)
 * @param maxLiveEvents most interprocess events alive at once (default
 *                      {@value #DEFAULT_MAX_LIVE_EVENTS}, as PyTorch): one is kept per shared
 *                      storage until it is freed; a send that would need one more synchronizes
 *                      the stream instead. 0 always synchronizes.
 */
public record CudaConfig(int device, int maxLiveEvents) {
    /** The default cap on live interprocess events, PyTorch's. */
    public static final int DEFAULT_MAX_LIVE_EVENTS = 1_000;

    /**
     * Checks the settings.
     *
     * @throws IllegalArgumentException when {@code device} or {@code maxLiveEvents} is negative
     */
    public CudaConfig {
        if (device < 0) {
            throw new IllegalArgumentException("CUDA device ordinal must not be negative: " + device);
        }
        if (maxLiveEvents < 0) {
            throw new IllegalArgumentException("maxLiveEvents must not be negative: " + maxLiveEvents);
        }
    }

    /**
     * Device 0, {@value #DEFAULT_MAX_LIVE_EVENTS} live events.
     *
     * @return the defaults
     */
    public static CudaConfig defaults() {
        return new CudaConfig(0, DEFAULT_MAX_LIVE_EVENTS);
    }

    /**
     * These settings on another device.
     *
     * @param ordinal the CUDA device ordinal, from 0
     * @return a new configuration
     */
    public CudaConfig withDevice(int ordinal) {
        return new CudaConfig(ordinal, maxLiveEvents);
    }

    /**
     * These settings with another cap on live interprocess events.
     *
     * @param max the most events alive at once; 0 synchronizes every send instead
     * @return a new configuration
     */
    public CudaConfig withMaxLiveEvents(int max) {
        return new CudaConfig(device, max);
    }
}
