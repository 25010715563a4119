package io.refshare;

import io.refshare.exceptions.ResourceLimitException;
import io.refshare.counter.CounterFileLayout;
import io.refshare.cuda.CudaConfig;
import io.refshare.shm.ShmDirectory;

import java.nio.file.Path;
import java.util.Objects;

/**
 * How a process uses refshare. Every process that talks to another must agree on the
 * directory and the prefix.
 *
 * @param directory          where shared files live (default {@code /dev/shm})
 * @param prefix             first part of every file name (default {@code refshare})
 * @param groupAccess        files readable and writable by the owner's group too (mode 0660 instead of 0600)
 * @param capacityBytes      most bytes of segments this process may hold (default unlimited)
 * @param slotsPerCounterFile tokens per counter file before a new one is started
 * @param peersPerCounterFile processes that can hold tokens of one counter file at the same time; an entry is
 *                           recycled when its process leaves (closes) or dies, so any number of successive
 *                           consumers is served. A receiver that finds every entry held gets a
 *                           {@link ResourceLimitException} naming this limit (the message is not consumed)
 * @param cuda               the CUDA device this process uses and how (only read when device memory is first used)
 */
public record RefshareConfig(Path directory, String prefix, boolean groupAccess, long capacityBytes,
                             int slotsPerCounterFile, int peersPerCounterFile, CudaConfig cuda) {

    public static final int DEFAULT_SLOTS_PER_COUNTER_FILE = 10_000;
    public static final int DEFAULT_PEERS_PER_COUNTER_FILE = 256;

    public RefshareConfig {
        if (capacityBytes <= 0) {
            throw new IllegalArgumentException("capacityBytes must be positive: " + capacityBytes);
        }
        if (slotsPerCounterFile < 1 || peersPerCounterFile < 1) {
            throw new IllegalArgumentException("counter files need at least one slot and one peer");
        }
        if (slotsPerCounterFile > CounterFileLayout.MAX_SLOTS || peersPerCounterFile > CounterFileLayout.MAX_PEERS) {
            throw new IllegalArgumentException("a counter file holds at most " + CounterFileLayout.MAX_SLOTS
                    + " slots and " + CounterFileLayout.MAX_PEERS + " peers: " + slotsPerCounterFile + " slots, "
                    + peersPerCounterFile + " peers asked");
        }
        Objects.requireNonNull(cuda, "cuda (use CudaConfig.defaults())");
    }

    /** A configuration with the default CUDA settings. */
    public RefshareConfig(Path directory, String prefix, boolean groupAccess, long capacityBytes,
                          int slotsPerCounterFile, int peersPerCounterFile) {
        this(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                CudaConfig.defaults());
    }

    public static RefshareConfig defaults() {
        return new RefshareConfig(ShmDirectory.DEFAULT_DIRECTORY, ShmDirectory.DEFAULT_PREFIX, false, Long.MAX_VALUE,
                DEFAULT_SLOTS_PER_COUNTER_FILE, DEFAULT_PEERS_PER_COUNTER_FILE, CudaConfig.defaults());
    }

    public RefshareConfig withDirectory(Path d) {
        return new RefshareConfig(d, prefix, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                cuda);
    }

    public RefshareConfig withPrefix(String p) {
        return new RefshareConfig(directory, p, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                cuda);
    }

    public RefshareConfig withGroupAccess(boolean g) {
        return new RefshareConfig(directory, prefix, g, capacityBytes, slotsPerCounterFile, peersPerCounterFile, cuda);
    }

    public RefshareConfig withCapacityBytes(long c) {
        return new RefshareConfig(directory, prefix, groupAccess, c, slotsPerCounterFile, peersPerCounterFile, cuda);
    }

    public RefshareConfig withSlotsPerCounterFile(int s) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, s, peersPerCounterFile, cuda);
    }

    /** Processes that can hold tokens of one of this process's counter files at the same time (default 256). */
    public RefshareConfig withPeersPerCounterFile(int p) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile, p, cuda);
    }

    public RefshareConfig withCuda(CudaConfig c) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile,
                peersPerCounterFile, c);
    }

    /** The CUDA device this process allocates on and opens received device memory on (default 0). */
    public RefshareConfig withCudaDevice(int ordinal) {
        return withCuda(cuda.withDevice(ordinal));
    }

    ShmDirectory shmDirectory() {
        return ShmDirectory.of(directory, prefix, groupAccess);
    }
}
