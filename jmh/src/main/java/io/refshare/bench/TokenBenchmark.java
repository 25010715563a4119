package io.refshare.bench;

import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.shm.ShmDirectory;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.ThreadParams;

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * A receiver's {@link CounterFile#claim} + {@link CounterFile#release} of one token, by one
 * thread and by two threads taking alternate tokens of the same files: neighbouring tokens
 * share cache lines, and every release adds to the file's one release count, as when two
 * consumers take alternate messages of one producer.
 *
 * <p>A token is used once, and only the owner can hand them out (one thread at a time), so
 * before each iteration the owner hands out {@value #FILES} files of
 * {@value CounterFileLayout#MAX_SLOTS} tokens, unmeasured; iterations are kept short
 * ({@value #ITERATION_MILLIS} ms) so that they cannot use them up (an iteration that would
 * fails loudly instead of measuring something else).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 10, time = TokenBenchmark.ITERATION_MILLIS, timeUnit = TimeUnit.MILLISECONDS)
@Measurement(iterations = 20, time = TokenBenchmark.ITERATION_MILLIS, timeUnit = TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class TokenBenchmark {
    static final int ITERATION_MILLIS = 20;
    static final int FILES = 4;
    private static final int SLOT_BITS = Integer.numberOfTrailingZeros(CounterFileLayout.MAX_SLOTS);
    private static final long TOKENS = (long) FILES << SLOT_BITS;

    /** Tokens in flight, handed out before each iteration. */
    @State(Scope.Benchmark)
    public static class Pool {
        private ShmTemp temp;
        private ShmDirectory dir;
        final CounterFile[] files = new CounterFile[FILES];

        @Setup(Level.Trial)
        public void setUp() throws IOException {
            temp = ShmTemp.create();
            dir = temp.directory();
        }

        @Setup(Level.Iteration)
        public void handOutAll() {
            for (int f = 0; f < FILES; f++) {
                files[f] = CounterFile.create(dir, CounterFileLayout.MAX_SLOTS, 16);
                while (files[f].handOut() >= 0) {
                    // every slot in flight
                }
            }
        }

        @TearDown(Level.Iteration)
        public void removeAll() {
            for (int f = 0; f < FILES; f++) {
                files[f].unlink();
                files[f].close();
                files[f] = null;
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() throws IOException {
            temp.delete();
        }
    }

    /** This thread's next token: thread i of n takes tokens i, i + n, i + 2n, ... */
    @State(Scope.Thread)
    public static class Cursor {
        long next;
        int stride;

        @Setup(Level.Iteration)
        public void reset(ThreadParams params) {
            next = params.getThreadIndex();
            stride = params.getThreadCount();
        }
    }

    @Benchmark
    @Threads(1)
    public boolean claimRelease(Pool pool, Cursor cursor) {
        return claimAndRelease(pool, cursor);
    }

    @Benchmark
    @Threads(2)
    public boolean claimReleaseContended(Pool pool, Cursor cursor) {
        return claimAndRelease(pool, cursor);
    }

    private static boolean claimAndRelease(Pool pool, Cursor cursor) {
        long token = cursor.next;
        if (token >= TOKENS) {
            throw new IllegalStateException("all " + TOKENS + " tokens of this iteration were used: keep iterations at "
                    + ITERATION_MILLIS + " ms (no -r/-w on the command line)");
        }
        cursor.next = token + cursor.stride;
        CounterFile file = pool.files[(int) (token >>> SLOT_BITS)];
        int slot = (int) token & (CounterFileLayout.MAX_SLOTS - 1);
        if (!file.claim(slot)) {
            throw new IllegalStateException("token " + token + " was not in flight");
        }
        return file.release(slot);
    }
}
