package io.refshare.bench;

import io.refshare.memory.AllocatedBlock;
import io.refshare.memory.CachingAllocator;
import io.refshare.memory.HostBackend;
import io.refshare.memory.Segment;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * Shared memory for one message: {@link CachingAllocator#allocate} + {@link CachingAllocator#free}
 * over {@link HostBackend} segments in /dev/shm (small sizes come from buddy-split shared
 * segments, 16 MiB from a cached segment of its own), by one thread and by two threads on
 * the same allocator, against the alternative of no pool: a new shared-memory segment per
 * message ({@link HostBackend#create}: a new file, its space reserved, mapped; then unmapped
 * and removed), as torch.multiprocessing does for every new tensor. The fresh segment is not
 * pre-faulted here, which favours it: touching its pages would cost a page fault each on top,
 * while the pooled blocks' pages were faulted once, when the pool grew.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@State(Scope.Benchmark)
public class AllocatorBenchmark {
    @Param({"1024", "65536", "1048576", "16777216"})
    public long bytes;

    private ShmTemp temp;
    private CachingAllocator allocator;
    private HostBackend freshSegments;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        temp = ShmTemp.create();
        allocator = new CachingAllocator(new HostBackend(temp.directory()));
        freshSegments = new HostBackend(temp.directory(), false);
        allocator.free(allocator.allocate(bytes)); // the pool's first segment, grown before measuring
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        allocator.close();
        temp.delete();
    }

    @Benchmark
    @Threads(1)
    public long pooled() {
        return allocateFree();
    }

    @Benchmark
    @Threads(2)
    public long pooledContended() {
        return allocateFree();
    }

    @Benchmark
    @Threads(1)
    public long freshSegment() {
        Segment s = freshSegments.create(bytes);
        long size = s.size();
        freshSegments.free(s);
        return size;
    }

    private long allocateFree() {
        AllocatedBlock b = allocator.allocate(bytes);
        long offset = b.offset();
        allocator.free(b);
        return offset;
    }
}
