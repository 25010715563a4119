package io.refshare.cli;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.Tensor;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;

/**
 * A reader process of {@code refshare hotswap}: opens the holder by name and, until its
 * stdin ends (the parent closes it, or dies), acquires the current version, verifies every
 * byte, and releases it. Reports on stdout: {@code READY} once the holder is open,
 * {@code PROGRESS acquisitions distinct corrupt backwards latest} a few times a second, and
 * {@code DONE acquisitions distinct corrupt backwards latest retiredHere anomalies} after
 * closing the holder. Args: directory, prefix, holder name.
 */
public final class HotswapReader {
    private static volatile boolean stop;

    public static void main(String[] args) throws Exception {
        RefshareConfig config = RefshareConfig.defaults().withDirectory(Path.of(args[0])).withPrefix(args[1]);
        // the stop signal is the end of stdin, so a parent that dies stops its readers too
        Thread.ofPlatform().daemon().name("stop-on-eof").start(() -> {
            try (InputStream in = System.in) {
                while (in.read() >= 0) {
                    // nothing is sent; only the end matters
                }
            } catch (IOException ignored) {
                // a broken stdin is an end too
            }
            stop = true;
        });
        long acquisitions = 0;
        long distinct = 0;
        long corrupt = 0;
        long backwards = 0;
        long latest = 0; // versions are numbered from 1
        long lastReport = System.nanoTime();
        SharedHolder.Stats closed;
        try (Refshare rs = Refshare.open(config)) {
            SharedHolder weights = rs.openHolder(args[2]);
            try {
                System.out.println("READY");
                System.out.flush();
                while (!stop) {
                    try (Tensor w = weights.acquire()) {
                        if (w == null) {
                            Thread.onSpinWait(); // emptied: the publisher is closing the holder
                            continue;
                        }
                        // a version rewritten or freed while held, or published half-written, fails here
                        long version = DemoPattern.verify(w.data());
                        acquisitions++;
                        if (version < 0) {
                            corrupt++;
                        } else if (version < latest) {
                            backwards++;
                        } else if (version > latest) {
                            distinct++;
                            latest = version;
                        }
                    }
                    if (System.nanoTime() - lastReport > 100_000_000L) {
                        System.out.println("PROGRESS " + acquisitions + " " + distinct + " " + corrupt + " " + backwards
                                + " " + latest);
                        System.out.flush();
                        lastReport = System.nanoTime();
                    }
                }
            } finally {
                weights.close(); // before the Refshare: the versions it mapped live in the publisher's memory
            }
            closed = weights.stats(); // what this process retired: the parent adds up every process's share
        }
        System.out.println("DONE " + acquisitions + " " + distinct + " " + corrupt + " " + backwards + " " + latest
                + " " + closed.retiredHere() + " " + closed.anomalies());
        System.out.flush();
    }
}
