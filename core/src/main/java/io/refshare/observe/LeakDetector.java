package io.refshare.observe;

import java.lang.ref.Cleaner;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

/**
 * Finds tensors over another process's memory (received, acquired from a holder, or views
 * of those) that were garbage-collected without {@code close()}: each would otherwise pin
 * the producer's memory until this process exits. A watched tensor that is collected
 * unclosed is reported (log warning and a {@link Events.Leak} JFR event, with the stack
 * where it was made) and its reference is released.
 *
 * <p>Watching costs a stack capture and a {@link Cleaner} registration, so by default one
 * such tensor in {@value #SAMPLING_INTERVAL} is watched (at random). The system property
 * {@code refshare.leakDetection} chooses: {@code disabled}, {@code sampled} (default) or
 * {@code paranoid} (every tensor, for tests and debugging).
 */
public final class LeakDetector {
    public enum Level { DISABLED, SAMPLED, PARANOID }

    public static final int SAMPLING_INTERVAL = 128;
    private static final Level LEVEL = level(System.getProperty("refshare.leakDetection", "sampled"));
    private static final System.Logger LOG = System.getLogger(LeakDetector.class.getName());
    private static final AtomicLong LEAKS = new AtomicLong();
    private static final Cleaner CLEANER = Cleaner.create(
            Thread.ofPlatform().daemon().name("refshare-leak-detector").factory());

    private LeakDetector() {
    }

    /** What a watched tensor tells the detector when it is closed properly. */
    public static final class Watch implements Runnable {
        private final Throwable receivedAt;
        private final Runnable release;
        private final long length;
        private volatile boolean closed;
        private Cleaner.Cleanable cleanable;

        private Watch(Throwable receivedAt, Runnable release, long length) {
            this.receivedAt = receivedAt;
            this.release = release;
            this.length = length;
        }

        /** The tensor was closed: nothing to report. */
        public void closed() {
            closed = true;
            cleanable.clean();
        }

        /** Runs once: when closed (nothing to do) or when the tensor became unreachable unclosed. */
        @Override
        public void run() {
            if (closed) {
                return;
            }
            LEAKS.incrementAndGet();
            String where = Arrays.stream(receivedAt.getStackTrace()).limit(12).map(e -> "\tat " + e)
                    .collect(Collectors.joining("\n"));
            LOG.log(System.Logger.Level.WARNING, "LEAK: a tensor over {0} bytes of another process''s memory (received, "
                    + "acquired from a holder, or a view of one) was garbage-collected without close(); its reference "
                    + "is released now. Close such tensors (try-with-resources). It was made at:\n{1}", length, where);
            Events.Leak e = new Events.Leak();
            if (e.shouldCommit()) {
                e.length = length;
                e.receivedAt = where;
                e.commit();
            }
            release.run();
        }
    }

    /**
     * Whether the next tensor is to be watched: by the level, and when sampled by a
     * thread-local draw, not a shared counter (threads acquiring from one holder would contend
     * on the counter's cache line for every tensor). Asked before {@link #watch}, so that a
     * tensor not watched costs no release action either.
     */
    public static boolean sample() {
        return LEVEL == Level.PARANOID
                || (LEVEL == Level.SAMPLED && ThreadLocalRandom.current().nextInt(SAMPLING_INTERVAL) == 0);
    }

    /**
     * Watches {@code tensor} (one {@link #sample()} chose); {@code release} gives its reference
     * back if it leaks (it must not refer to the tensor).
     */
    public static Watch watch(Object tensor, Runnable release, long length) {
        Watch w = new Watch(new Throwable("made here"), release, length);
        w.cleanable = CLEANER.register(tensor, w);
        return w;
    }

    /** Leaks found since this JVM started. */
    public static long leaks() {
        return LEAKS.get();
    }

    public static Level level() {
        return LEVEL;
    }

    private static Level level(String value) {
        try {
            return Level.valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            return Level.SAMPLED;
        }
    }
}
