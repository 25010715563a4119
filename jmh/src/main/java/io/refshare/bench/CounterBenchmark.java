package io.refshare.bench;

import io.refshare.RefshareConfig;
import io.refshare.counter.CounterFile;
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

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A reference count in this process against one in a mapped shared-memory file, uncontended
 * (one thread) and contended (two threads adding to the same word), and the whole life of a
 * refshare token.
 *
 * <ul>
 * <li>{@code inProcessAdd*}: {@link AtomicLong#getAndAdd} on a heap object: the in-process floor.</li>
 * <li>{@code mappedAdd*}: {@code ValueLayout.JAVA_LONG.varHandle()} {@code getAndAdd} on a word of
 *     a {@code MAP_SHARED} mapping of a /dev/shm file (what every cross-process count is built on).</li>
 * <li>{@code tokenSendReceiveRelease}: {@link CounterFile#handOut()} (the sender's count at send),
 *     {@link CounterFile#claim} (the receiver takes it) and {@link CounterFile#release} (the receiver
 *     lets go): every counter operation one message costs, on files of the default geometry
 *     ({@value RefshareConfig#DEFAULT_SLOTS_PER_COUNTER_FILE} tokens, 256 peers), including a new
 *     file whenever one is used up, as the sender's pool does.</li>
 * </ul>
 * Contended claim/release of tokens of one file: {@link TokenBenchmark}. Run the suite with
 * {@code java --sun-misc-unsafe-memory-access=allow -jar jmh/target/benchmarks.jar 'io.refshare.bench'}
 * (do not override the thread counts with {@code -t}: each method fixes its own).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class CounterBenchmark {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    /** One counter of each kind, shared by the benchmark's threads. */
    @State(Scope.Benchmark)
    public static class Counters {
        final AtomicLong inProcess = new AtomicLong();
        MemorySegment mapped;
        private ShmTemp temp;
        private Arena arena;

        @Setup(Level.Trial)
        public void setUp() throws IOException {
            temp = ShmTemp.create();
            arena = Arena.ofShared();
            Path file = temp.path().resolve("counter");
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                mapped = ch.map(FileChannel.MapMode.READ_WRITE, 0, 4096, arena);
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() throws IOException {
            arena.close();
            temp.delete();
        }
    }

    /** A sender's counter file of the default geometry, replaced by a new one when its tokens are used up. */
    @State(Scope.Thread)
    public static class Tokens {
        private ShmTemp temp;
        private ShmDirectory dir;
        CounterFile file;
        long filesCreated;

        @Setup(Level.Trial)
        public void setUp() throws IOException {
            temp = ShmTemp.create();
            dir = temp.directory();
            file = newFile();
        }

        CounterFile newFile() {
            filesCreated++;
            return CounterFile.create(dir, RefshareConfig.DEFAULT_SLOTS_PER_COUNTER_FILE,
                    RefshareConfig.DEFAULT_PEERS_PER_COUNTER_FILE);
        }

        /** The next token's slot, starting a new file when the current one is used up. */
        int handOut() {
            int slot = file.handOut();
            if (slot < 0) {
                file.unlink(); // every token of the old file came back: the sender's pool removes it now
                file.close();
                file = newFile();
                slot = file.handOut();
            }
            return slot;
        }

        @TearDown(Level.Trial)
        public void tearDown() throws IOException {
            file.unlink();
            file.close();
            temp.delete();
        }
    }

    @Benchmark
    @Threads(1)
    public long inProcessAdd(Counters c) {
        return c.inProcess.getAndAdd(1);
    }

    @Benchmark
    @Threads(2)
    public long inProcessAddContended(Counters c) {
        return c.inProcess.getAndAdd(1);
    }

    @Benchmark
    @Threads(1)
    public long mappedAdd(Counters c) {
        return (long) LONG.getAndAdd(c.mapped, 0L, 1L);
    }

    @Benchmark
    @Threads(2)
    public long mappedAddContended(Counters c) {
        return (long) LONG.getAndAdd(c.mapped, 0L, 1L);
    }

    @Benchmark
    @Threads(1)
    public boolean tokenSendReceiveRelease(Tokens t) {
        int slot = t.handOut();
        if (!t.file.claim(slot)) {
            throw new IllegalStateException("token " + slot + " was not in flight");
        }
        return t.file.release(slot);
    }
}
