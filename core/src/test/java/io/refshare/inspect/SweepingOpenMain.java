package io.refshare.inspect;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;

import java.nio.file.Path;

/**
 * A third process that only opens refshare in a directory (every open sweeps it, as
 * {@code refshare gc} would), prints {@code OPENED} and closes.
 */
public final class SweepingOpenMain {
    static void run(String[] args) {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])))) {
            System.out.println("OPENED");
            System.out.flush();
        }
    }
}
