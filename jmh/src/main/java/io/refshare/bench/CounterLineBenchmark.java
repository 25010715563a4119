package io.refshare.bench;

import io.refshare.counter.CounterFileLayout;
import io.refshare.shm.LittleEndian;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;

/**
 * A sender and a releaser on the words of one counter file's header, in a mapped /dev/shm
 * file, with the {@code releases} word where counter-file version 1 had it (offset 56, on
 * the owner's line beside {@code handed out}) and where version 2 has it (offset 64, a line
 * of its own with {@code collector waiting}): the cost of a release under a busy sender,
 * before and after, in one run.
 *
 * <p>The sender does what a send does to the header: a release store of {@code handed out}.
 * The releaser does what a release does: a fetch-add of {@code releases}, then a load of
 * {@code collector waiting}. Run with
 * {@code java --sun-misc-unsafe-memory-access=allow -jar jmh/target/benchmarks.jar CounterLineBenchmark}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@State(Scope.Group)
public class CounterLineBenchmark {
    private static final VarHandle LONG = LittleEndian.ATOMIC_LONG;

    /** Where {@code releases} lies: "56" as in version 1, "64" as in version 2; collector waiting follows it. */
    @Param({"56", "64"})
    public long releasesOffset;

    private MemorySegment header;
    private Arena arena;
    private ShmTemp temp;
    private long sent;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        temp = ShmTemp.create();
        arena = Arena.ofShared();
        try (FileChannel ch = FileChannel.open(temp.path().resolve("counter"), StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            header = ch.map(FileChannel.MapMode.READ_WRITE, 0, CounterFileLayout.HEADER_LENGTH, arena);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        arena.close();
        temp.delete();
    }

    @Benchmark
    @Group("sendAndRelease")
    @GroupThreads(1)
    public void send() {
        LONG.setRelease(header, CounterFileLayout.HANDED_OUT_OFFSET, ++sent);
    }

    @Benchmark
    @Group("sendAndRelease")
    @GroupThreads(1)
    public long release() {
        LONG.getAndAdd(header, releasesOffset, 1L);
        // in version 1 collector waiting sat at 64, one word past releases' 56; in version 2 at 72
        return (long) LONG.getVolatile(header, releasesOffset + 8);
    }
}
