package io.refshare.holder;

import io.refshare.AtomicHolder;
import io.refshare.SharedHolder;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.holder.SharedHolderLayout.Geometry;
import io.refshare.shm.ProcessIdentity;
import io.refshare.Tensor;
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
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.concurrent.locks.StampedLock;

/**
 * acquire + release of the current version of a holder, by each way of keeping a version
 * alive while it is used. Run with {@code -t 1} (uncontended) and {@code -t 2} (two threads
 * on the same holder); see docs/holders.md. Every variant reads the value it acquired.
 *
 * <ul>
 * <li>{@code twoAtomicAdds}: the floor, two getAndAdds on one shared counter pair and nothing else.</li>
 * <li>{@code atomicHolder}: {@link AtomicHolder} (one add on the holder word, one on the version).</li>
 * <li>{@code sharedProtocol}: {@link SharedHolder}'s protocol on a mapped /dev/shm file (the
 *     holder word, this process's held count, the version's count), without mapping a tensor.</li>
 * <li>{@code sharedProtocolWithLocalWork}: the same, with thread-local work before and after the
 *     release ({@link Blackhole#consumeCPU}, {@value #LOCAL_WORK} tokens each, about as long alone
 *     as what {@code SharedHolder} adds to the protocol) and no shared write: how much two
 *     threads' protocol costs once its cache lines no longer stay with one thread for several
 *     iterations in a row.</li>
 * <li>{@code sharedHolderTensor}: the whole {@link SharedHolder#acquire()}: a use of the
 *     process's share of the current version (the protocol runs once per version and process,
 *     not per acquisition), plus the version's block (alongside the handle's pin of it) as a
 *     {@link Tensor}, and closing it.</li>
 * <li>{@code casRefCount}: a volatile reference to a version with its own count, acquired by a
 *     compare-and-set loop that refuses a count of zero and re-reads the reference (Netty's
 *     {@code retain} on a holder): correct only because the garbage collector keeps a dead
 *     version's counter readable, which shared memory does not.</li>
 * <li>{@code readWriteLock}, {@code stampedLock}: a reader holds the read lock while it uses
 *     the value; the publisher takes the write lock to swap and destroy.</li>
 * </ul>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@State(Scope.Benchmark)
public class HolderBenchmark {
    /** The value every variant hands out. */
    public static final class Weights {
        final long checksum;

        Weights(long checksum) {
            this.checksum = checksum;
        }
    }

    private final Weights weights = new Weights(42);

    private final AtomicLong added = new AtomicLong();
    private final AtomicLong subtracted = new AtomicLong();

    private final AtomicHolder<Weights> atomic = new AtomicHolder<>();

    private final ReentrantReadWriteLock rw = new ReentrantReadWriteLock();
    private Weights rwCurrent;

    private final StampedLock stamped = new StampedLock();
    private Weights stampedCurrent;

    /** Netty-style counted version: count 1 for the holder, +1 per reader. */
    static final class Counted {
        final Weights value;
        final AtomicLong refCnt = new AtomicLong(1);

        Counted(Weights value) {
            this.value = value;
        }
    }

    private volatile Counted counted;

    private Path dir;
    private Arena arena;
    private HolderFile shared;
    private int row;
    private final HolderFile.Retirement ignore = (slot, sequence, descriptor) -> {
    };
    private Refshare refshare;
    private SharedHolder holder;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        atomic.set(weights, w -> {
        });
        rwCurrent = weights;
        stampedCurrent = weights;
        counted = new Counted(weights);

        // the shared protocol on a real shared-memory mapping, as another process would map it
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-jmh-");
        Path f = dir.resolve("holder");
        Geometry g = new Geometry(SharedHolderLayout.DEFAULT_SLOTS, SharedHolderLayout.DEFAULT_READERS);
        arena = Arena.ofShared();
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            MemorySegment m = ch.map(FileChannel.MapMode.READ_WRITE, 0, g.fileLength(), arena);
            SharedHolderLayout.format(m, g, ProcessIdentity.current());
            shared = new HolderFile(m, g, HolderWord.DEFAULT_DRAIN_AT);
        }
        long me = ProcessIdentity.current().packed();
        row = shared.registerReader(me);
        long word = shared.claimSlot();
        shared.fill(word, me, new byte[]{42});
        shared.unpin(shared.swap(word), ignore);

        refshare = Refshare.open(RefshareConfig.defaults().withDirectory(dir));
        holder = refshare.createHolder();
        try (Tensor t = refshare.allocateBytes(1 << 20)) {
            holder.publish(t);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        holder.close();
        refshare.close();
        atomic.close();
        arena.close();
        Files.delete(dir.resolve("holder"));
        Files.delete(dir);
    }

    @Benchmark
    public long twoAtomicAdds() {
        added.getAndAdd(1);
        subtracted.getAndAdd(-1);
        return weights.checksum;
    }

    @Benchmark
    public long atomicHolder() {
        AtomicHolder.Ref<Weights> ref = atomic.acquire();
        long c = ref.get().checksum;
        ref.release();
        return c;
    }

    @Benchmark
    public long sharedProtocol() {
        long w = shared.acquire(row);
        long c = HolderWord.slot(w);
        shared.release(row, (int) c, ignore);
        return c;
    }

    /** Tokens of {@link Blackhole#consumeCPU} on each side of the release in {@code sharedProtocolWithLocalWork}. */
    static final int LOCAL_WORK = 24;

    @Benchmark
    public long sharedProtocolWithLocalWork() {
        long w = shared.acquire(row);
        long c = HolderWord.slot(w);
        Blackhole.consumeCPU(LOCAL_WORK);
        shared.release(row, (int) c, ignore);
        Blackhole.consumeCPU(LOCAL_WORK);
        return c;
    }

    @Benchmark
    public long sharedHolderTensor() {
        try (Tensor t = holder.acquire()) {
            return t.data().byteSize();
        }
    }

    @Benchmark
    public long casRefCount() {
        Counted c;
        while (true) {
            c = counted;
            long n = c.refCnt.get();
            if (n > 0 && c.refCnt.compareAndSet(n, n + 1)) {
                break;
            }
        }
        long v = c.value.checksum;
        if (c.refCnt.decrementAndGet() == 0) {
            throw new AssertionError("the holder's own count keeps it above zero");
        }
        return v;
    }

    @Benchmark
    public long readWriteLock() {
        ReentrantReadWriteLock.ReadLock lock = rw.readLock();
        lock.lock();
        try {
            return rwCurrent.checksum;
        } finally {
            lock.unlock();
        }
    }

    @Benchmark
    public long stampedLock() {
        long stamp = stamped.readLock();
        try {
            return stampedCurrent.checksum;
        } finally {
            stamped.unlockRead(stamp);
        }
    }
}
