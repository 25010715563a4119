package io.refshare.testing;

import io.refshare.exceptions.RefshareException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A file of another process cut short while this process opens it, after the open sized it and
 * before (or while) it checks or reads it: the window is microseconds wide, so {@link #run} cuts
 * the file to nothing and restores it (its first 64 KiB as they were, then its last byte) over
 * and over on a thread of its own, while the calling thread opens it afresh, until the open has
 * met the window {@code wantedHits} times or {@code maxSeconds} passed. What an open returns is
 * closed while the file is whole: the subject is the open, and a use of a file cut under it
 * has gaps of its own (an atomic instruction on a page cut between the read that guards it and
 * the instruction ends the JVM). Run it in a child JVM of its own (faults on a mapping change
 * what compiled code does in the JVM that met them); it prints one line, which the test checks
 * with {@link #assertMetAndNothingLeft}:
 * <pre>
 *   DONE attempts opened refused truncatedWhileOpening mappingsLeft
 *   RAW throwable                 (anything but a RefshareException escaped an attempt)
 * </pre>
 * {@code mappingsLeft} counts the mappings of the file left in the process once every attempt
 * is done and closed (a mapping that another thread, a startup sweep say, holds for a moment is
 * waited out for up to two seconds; a leaked one never goes).
 */
public final class TruncatingOpener {
    /** What a restore writes back: the whole file, or the first 64 KiB of a longer one (its header and tables). */
    private static final int KEPT = 64 * 1024;
    private static final String HIT = "truncated while it was being opened";

    /** One attempt: opens the file afresh, through a fresh context if it needs one. */
    public interface Attempt {
        /** What to close once the file is whole again; a refusal is a RefshareException, and leaves nothing open. */
        AutoCloseable open() throws Exception;
    }

    private TruncatingOpener() {
    }

    /** The child's side: see the class notes. */
    public static void run(Path file, long maxSeconds, int wantedHits, Attempt attempt) throws Exception {
        long deadline = System.nanoTime() + maxSeconds * 1_000_000_000L;
        long size = Files.size(file);
        byte[] content = Files.readAllBytes(file);
        ByteBuffer kept = ByteBuffer.wrap(Arrays.copyOf(content, (int) Math.min(size, KEPT)));
        byte lastByte = content[(int) size - 1];
        AtomicBoolean cutting = new AtomicBoolean(true);
        ReentrantLock whole = new ReentrantLock(true); // held, the file is whole and stays so
        Thread cutter = Thread.ofPlatform().start(() -> {
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                while (cutting.get()) {
                    whole.lock();
                    try {
                        ch.truncate(0);
                        restore(ch, size, kept, lastByte);
                    } finally {
                        whole.unlock();
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        long attempts = 0;
        long opened = 0;
        long refused = 0;
        long hits = 0;
        Throwable raw = null;
        try {
            while (hits < wantedHits && System.nanoTime() - deadline < 0) {
                attempts++;
                AutoCloseable open;
                try {
                    open = attempt.open();
                } catch (RefshareException e) {
                    refused++;
                    if (String.valueOf(e.getMessage()).contains(HIT)) {
                        hits++;
                    }
                    continue;
                }
                opened++;
                whole.lock();
                try {
                    open.close();
                } finally {
                    whole.unlock();
                }
            }
        } catch (Throwable t) {
            raw = t;
        } finally {
            cutting.set(false);
            cutter.join(); // the file whole again before anything else happens
        }
        if (raw != null) {
            System.out.println("RAW " + raw);
            System.out.flush();
            raw.printStackTrace(); // where it escaped from, on the test's output
            Runtime.getRuntime().halt(1);
        }
        System.out.println("DONE " + attempts + " " + opened + " " + refused + " " + hits + " " + mappingsLeft(file));
        System.out.flush();
    }

    /** The test's side: the child met the window, and left no mapping of the file. */
    public static void assertMetAndNothingLeft(ChildJvm child) {
        String line = child.expect("DONE");
        System.out.println("DONE " + line + " (attempts opened refused truncatedWhileOpening mappingsLeft)");
        String[] done = line.split(" ");
        assertEquals(0, child.waitFor(), line);
        assertTrue(Long.parseLong(done[3]) > 0, "the window was met in time: " + line);
        assertEquals("0", done[4], "mappings of the file left in the child: " + line);
    }

    private static long mappingsLeft(Path file) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + 2_000_000_000L;
        while (true) {
            long left = Files.readAllLines(Path.of("/proc/self/maps")).stream()
                    .filter(l -> l.contains(file.toString())).count();
            if (left == 0 || System.nanoTime() - deadline > 0) {
                return left;
            }
            Thread.sleep(50);
        }
    }

    /** Grows the cut file back to {@code size} (truncate only shrinks): its first bytes, then its last byte. */
    private static void restore(FileChannel ch, long size, ByteBuffer kept, byte lastByte) throws IOException {
        ch.write(kept.duplicate(), 0);
        ch.write(ByteBuffer.wrap(new byte[] {lastByte}), size - 1);
    }
}
