package io.refshare.harness;

import io.refshare.RefshareConfig;

import java.nio.file.Path;
import java.util.List;

/**
 * What one run measures.
 *
 * @param sizes      payload sizes in bytes, in table order
 * @param quick      smaller counts (see {@link SizePlan})
 * @param iterations measured rounds and messages per size and system; 0 lets the size decide
 * @param warmup     ping-pong rounds of each kind in one warm-up pass, run before anything is measured
 *                   so that both JVMs have compiled their hot paths (streams warm up with five times as many)
 * @param warmupSeconds warm-up passes repeat until this long has passed (at least one pass): on two
 *                   CPUs the compilers share them with the two busy processes, and a 1 KiB stream took
 *                   5 to 8 s to reach its steady rate
 * @param window     the streaming queue's capacity at every size; 0 lets the size decide ({@link SizePlan#defaultWindow})
 * @param torch      also measure torch.multiprocessing when {@code /usr/bin/python3} has torch
 * @param python     also measure Java -> Python and Python -> Java when {@code /usr/bin/python3} imports
 *                   the refshare package
 */
record Settings(List<Long> sizes, boolean quick, int iterations, int warmup, int warmupSeconds, int window,
                Path directory, String prefix, boolean torch, boolean python) {

    Settings {
        sizes = sizes.stream().distinct().toList();
        if (sizes.isEmpty()) {
            throw new IllegalArgumentException("no sizes to measure");
        }
        for (long s : sizes) {
            if (s < 1 || s > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("sizes must be between 1 byte and 2 GiB - 1, was " + s);
            }
        }
        if (iterations < 0) {
            throw new IllegalArgumentException("--iterations must be positive (or 0 for the default), was " + iterations);
        }
        if (warmup < 0) {
            throw new IllegalArgumentException("--warmup must not be negative, was " + warmup);
        }
        if (window < 0 || window > 1 << 20) {
            throw new IllegalArgumentException("--window must be between 1 and 1048576 messages (or 0 for the default),"
                    + " was " + window);
        }
        if (warmupSeconds < 0) {
            throw new IllegalArgumentException("--warmup-seconds must not be negative, was " + warmupSeconds);
        }
    }

    RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(directory).withPrefix(prefix);
    }

    SizePlan plan(long size) {
        return SizePlan.of(size, quick, iterations, window);
    }
}
