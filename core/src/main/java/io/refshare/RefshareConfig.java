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
 * <p>Start from {@link #defaults()} and change what differs with the {@code with} methods;
 * each returns a new configuration and leaves this one as it was. The directory and the
 * prefix are checked when {@link Refshare#open(RefshareConfig)} uses them; the numbers are
 * checked here.
 *
 * @param directory          where shared files live (default {@code /dev/shm}); a tmpfs, so
 *                           that the files are memory
 * @param prefix             first part of every file name (default {@code refshare}): 1 to 32
 *                           letters, digits or {@code _}
 * @param groupAccess        files readable and writable by the owner's group too (mode 0660 instead of 0600)
 * @param capacityBytes      most bytes of host segments one {@link Refshare} instance may hold,
 *                           allocated or cached for reuse (default {@link Long#MAX_VALUE}: no
 *                           limit but the directory's space)
 * @param slotsPerCounterFile tokens per counter file before a new one is started, 1 ..
 *                           2<sup>20</sup> (default {@value #DEFAULT_SLOTS_PER_COUNTER_FILE}); a
 *                           token is one reference in flight or held by another process. A
 *                           slot takes 8 bytes of the file, allocated as slots are handed
 *                           out; every receiving process maps each file once, so fewer, larger
 *                           files cost many consumers less (with 10,000 slots, opening and
 *                           leaving files was a tenth of each of eight 1 KiB consumers' time)
 * @param peersPerCounterFile processes that can hold tokens of one counter file at the same time; an entry is
 *                           recycled when its process leaves (closes) or dies, so any number of successive
 *                           consumers is served. A receiver that finds every entry held gets a
 *                           {@link ResourceLimitException} naming this limit (the message is not consumed);
 *                           1 .. 2<sup>16</sup> (default {@value #DEFAULT_PEERS_PER_COUNTER_FILE})
 * @param cuda               the CUDA device this process uses and how (only read when device memory is first used)
 */
public record RefshareConfig(Path directory, String prefix, boolean groupAccess, long capacityBytes,
                             int slotsPerCounterFile, int peersPerCounterFile, CudaConfig cuda) {

    /** The default {@link #slotsPerCounterFile()}. */
    public static final int DEFAULT_SLOTS_PER_COUNTER_FILE = 100_000;
    /** The default {@link #peersPerCounterFile()}. */
    public static final int DEFAULT_PEERS_PER_COUNTER_FILE = 256;

    /**
     * A configuration with every field given.
     *
     * @param directory           where shared files live
     * @param prefix              first part of every file name
     * @param groupAccess         files readable and writable by the owner's group too
     * @param capacityBytes       most bytes of host segments one instance may hold, at least 1
     * @param slotsPerCounterFile tokens per counter file, 1 .. 2<sup>20</sup>
     * @param peersPerCounterFile processes holding tokens of one counter file at once, 1 .. 2<sup>16</sup>
     * @param cuda                the CUDA settings
     * @throws IllegalArgumentException when a number is out of its range
     * @throws NullPointerException     when {@code cuda} is null
     */
    public RefshareConfig {
        java.util.Objects.requireNonNull(directory, "directory");
        java.util.Objects.requireNonNull(prefix, "prefix");
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

    /**
     * A configuration with the default CUDA settings ({@link CudaConfig#defaults()}).
     *
     * @param directory           where shared files live
     * @param prefix              first part of every file name
     * @param groupAccess         files readable and writable by the owner's group too
     * @param capacityBytes       most bytes of host segments one instance may hold, at least 1
     * @param slotsPerCounterFile tokens per counter file, 1 .. 2<sup>20</sup>
     * @param peersPerCounterFile processes holding tokens of one counter file at once, 1 .. 2<sup>16</sup>
     * @throws IllegalArgumentException when a number is out of its range
     */
    public RefshareConfig(Path directory, String prefix, boolean groupAccess, long capacityBytes,
                          int slotsPerCounterFile, int peersPerCounterFile) {
        this(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                CudaConfig.defaults());
    }

    /**
     * The defaults: {@code /dev/shm}, prefix {@code refshare}, owner-only files, no cap,
     * {@value #DEFAULT_SLOTS_PER_COUNTER_FILE} slots and {@value #DEFAULT_PEERS_PER_COUNTER_FILE}
     * peers per counter file, CUDA device 0.
     *
     * @return the default configuration
     */
    public static RefshareConfig defaults() {
        return new RefshareConfig(ShmDirectory.DEFAULT_DIRECTORY, ShmDirectory.DEFAULT_PREFIX, false, Long.MAX_VALUE,
                DEFAULT_SLOTS_PER_COUNTER_FILE, DEFAULT_PEERS_PER_COUNTER_FILE, CudaConfig.defaults());
    }

    /**
     * This configuration in another directory (a test's own tmpfs, a directory shared with
     * containers).
     *
     * @param d the directory, which must exist when a {@link Refshare} opens with it
     * @return a new configuration
     */
    public RefshareConfig withDirectory(Path d) {
        return new RefshareConfig(d, prefix, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                cuda);
    }

    /**
     * This configuration with another file-name prefix: processes using different prefixes
     * in one directory do not see each other's files.
     *
     * @param p the prefix, 1 to 32 letters, digits or {@code _} (checked at open)
     * @return a new configuration
     */
    public RefshareConfig withPrefix(String p) {
        return new RefshareConfig(directory, p, groupAccess, capacityBytes, slotsPerCounterFile, peersPerCounterFile,
                cuda);
    }

    /**
     * This configuration with files shared with the owner's group (mode 0660) or not (0600).
     * With group access, this process also opens files of other users of a group it
     * belongs to.
     *
     * @param g true for mode 0660
     * @return a new configuration
     */
    public RefshareConfig withGroupAccess(boolean g) {
        return new RefshareConfig(directory, prefix, g, capacityBytes, slotsPerCounterFile, peersPerCounterFile, cuda);
    }

    /**
     * This configuration with a cap on host shared memory: an allocation that would take an
     * instance's segments past it throws
     * {@link io.refshare.exceptions.OutOfSharedMemoryException}, naming the cap.
     *
     * @param c the most bytes of segments, at least 1
     * @return a new configuration
     * @throws IllegalArgumentException when {@code c} is not positive
     */
    public RefshareConfig withCapacityBytes(long c) {
        return new RefshareConfig(directory, prefix, groupAccess, c, slotsPerCounterFile, peersPerCounterFile, cuda);
    }

    /**
     * This configuration with another number of tokens per counter file: more slots, fewer
     * files for a process with many references out at once.
     *
     * @param s tokens per counter file, 1 .. 2<sup>20</sup>
     * @return a new configuration
     * @throws IllegalArgumentException when {@code s} is out of range
     */
    public RefshareConfig withSlotsPerCounterFile(int s) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, s, peersPerCounterFile, cuda);
    }

    /**
     * This configuration with another number of processes that can hold tokens of one of this
     * process's counter files at the same time (default {@value #DEFAULT_PEERS_PER_COUNTER_FILE}):
     * raise it when more consumers than that are attached at once.
     *
     * @param p peer entries per counter file, 1 .. 2<sup>16</sup>
     * @return a new configuration
     * @throws IllegalArgumentException when {@code p} is out of range
     */
    public RefshareConfig withPeersPerCounterFile(int p) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile, p, cuda);
    }

    /**
     * This configuration with other CUDA settings.
     *
     * @param c the CUDA settings
     * @return a new configuration
     * @throws NullPointerException when {@code c} is null
     */
    public RefshareConfig withCuda(CudaConfig c) {
        return new RefshareConfig(directory, prefix, groupAccess, capacityBytes, slotsPerCounterFile,
                peersPerCounterFile, c);
    }

    /**
     * This configuration with another CUDA device: the one this process allocates on and
     * opens received device memory on (default 0).
     *
     * @param ordinal the device ordinal, 0 or more (the device is checked when first used)
     * @return a new configuration
     * @throws IllegalArgumentException when {@code ordinal} is negative
     */
    public RefshareConfig withCudaDevice(int ordinal) {
        return withCuda(cuda.withDevice(ordinal));
    }

    ShmDirectory shmDirectory() {
        return ShmDirectory.of(directory, prefix, groupAccess);
    }
}
