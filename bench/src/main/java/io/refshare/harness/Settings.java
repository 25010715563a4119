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
 * @param warmup     ping-pong rounds of each kind run once before anything is measured, so both
 *                   JVMs have compiled their hot paths (streams warm up with five times as many)
 * @param torch      also measure torch.multiprocessing when {@code /usr/bin/python3} has torch
 * @param python     also measure Java -> Python and Python -> Java when {@code /usr/bin/python3} imports
 *                   the refshare package
 */
record Settings(List<Long> sizes, boolean quick, int iterations, int warmup, Path directory, String prefix,
                boolean torch, boolean python) {

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
    }

    RefshareConfig config() {
        return RefshareConfig.defaults().withDirectory(directory).withPrefix(prefix);
    }

    SizePlan plan(long size) {
        return SizePlan.of(size, quick, iterations);
    }
}
