package io.refshare;

import io.refshare.bench.ShmTemp;
import io.refshare.holder.HolderFile;
import io.refshare.holder.HolderWord;
import io.refshare.holder.ProcessShare;
import io.refshare.holder.SharedHolderLayout;
import io.refshare.holder.StripedUses;
import io.refshare.observe.LeakDetector;
import io.refshare.share.ViewedBlock;
import io.refshare.shm.HandleUses;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Descriptor;
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

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * The steps of {@link SharedHolder#acquire()} and the close of the tensor it returns, one by
 * one, to see where the time over the shared-memory protocol alone
 * ({@code HolderBenchmark.sharedProtocol}) goes. Run with {@code -t 1} and {@code -t 2} (two
 * threads on the same objects, as two readers of one holder are) and {@code -prof gc}; the
 * numbers are in docs/bench/breakdown.md. The first two pairs are the ways the handle has
 * done each step, the one it used before and the one it uses now.
 * <ul>
 * <li>{@code handleUse}: one shared count of the handle's uses in progress, entered at
 *     acquire and left at the tensor's close ({@link HandleUses}, used before);
 *     {@code stripedUse}: the same on per-thread stripes ({@link StripedUses}, used now).</li>
 * <li>{@code receiveCacheView}: the block of the version mapped through the process's
 *     receive cache ({@code Sharing.view}: the segment looked up under the cache's lock, a
 *     {@link ViewedBlock} over it) and released (the segment's user dropped under the lock),
 *     as acquire did before; {@code viewAlongside}: a block alongside the handle's pin of the
 *     version ({@link ViewedBlock#alongside}), as acquire does now.</li>
 * <li>{@code receiveCacheViewTensor}, {@code viewAlongsideTensor}: each, wrapped in a
 *     {@link Tensor} (layout check, leak detector's sampling) and closed through it.</li>
 * <li>{@code leakSampling}: the leak detector's draw alone, and the watch of the one tensor in
 *     {@value LeakDetector#SAMPLING_INTERVAL} it picks (a stack capture and a cleaner).</li>
 * <li>{@code processShare}: a use of the process's share of the current version
 *     ({@link ProcessShare#tryAcquire()}: its thread's stripe, and a read of the holder word to
 *     check the version is current) and its end, on the holder's own file: what an acquire of
 *     a version the process already holds does instead of the protocol.</li>
 * <li>{@code acquireClose}: the whole {@link SharedHolder#acquire()} and close.</li>
 * </ul>
 * No step sends a JFR event: none is on the holder's acquire or release path.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@State(Scope.Benchmark)
public class HolderStepsBenchmark {
    private static final Runnable NOTHING = () -> {
    };

    private ShmTemp temp;
    private Refshare rs;
    private SharedHolder holder;
    private Descriptor published;
    private TensorLayout layout;
    private final HandleUses uses = new HandleUses(NOTHING);
    private final StripedUses stripedUses = new StripedUses(NOTHING);
    private ViewedBlock pin;
    private ShmFile holderFile;
    private ProcessShare<Object> share;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        temp = ShmTemp.create();
        rs = Refshare.open(RefshareConfig.defaults().withDirectory(temp.path()));
        holder = rs.createHolder();
        try (Tensor t = rs.allocateBytes(1 << 20)) {
            holder.publish(t);
            published = rs.shareDescriptor(t); // the same block as the version: the same mapping
        }
        layout = TensorLayout.contiguous(DType.UINT8, published.length());
        pin = rs.sharing().view(published, NOTHING);
        holderFile = rs.sharing().directory().open(holder.name(), ShmKind.HOLDER, 0);
        HolderFile file = new HolderFile(holderFile.segment(),
                SharedHolderLayout.readGeometry(holderFile.segment(), holderFile.path().toString()),
                HolderWord.DEFAULT_DRAIN_AT);
        int row = file.registerReader(ProcessIdentity.current().packed());
        share = new ProcessShare<>(file, slot -> file.release(row, slot, (s, q, d) -> {
        }));
        share.adopt(file.acquire(row), null).leave.run(); // the process's share of the version, no use in progress
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        share.retireCurrent();
        holderFile.close();
        pin.release();
        rs.sharing().cancel(published);
        holder.close();
        rs.close();
        temp.delete();
    }

    @Benchmark
    public boolean handleUse() {
        boolean entered = uses.enter();
        uses.leave();
        return entered;
    }

    @Benchmark
    public boolean stripedUse() {
        boolean entered = stripedUses.enter();
        stripedUses.leave();
        return entered;
    }

    @Benchmark
    public long viewAlongside() {
        ViewedBlock block = pin.alongside(NOTHING);
        long n = block.byteSize();
        block.release();
        return n;
    }

    @Benchmark
    public long viewAlongsideTensor() {
        try (Tensor t = new Tensor(pin.alongside(NOTHING), layout)) {
            return t.data().byteSize();
        }
    }

    @Benchmark
    public long receiveCacheView() {
        ViewedBlock block = rs.sharing().view(published, NOTHING);
        long n = block.byteSize();
        block.release();
        return n;
    }

    @Benchmark
    public long receiveCacheViewTensor() {
        try (Tensor t = new Tensor(rs.sharing().view(published, NOTHING), layout)) {
            return t.data().byteSize();
        }
    }

    @Benchmark
    public boolean leakSampling() {
        if (!LeakDetector.sample()) {
            return false;
        }
        LeakDetector.watch(this, NOTHING, 1).closed();
        return true;
    }

    @Benchmark
    public long processShare() {
        ProcessShare.Share<Object> s = share.tryAcquire();
        s.leave.run();
        return s.word();
    }

    @Benchmark
    public long acquireClose() {
        try (Tensor t = holder.acquire()) {
            return t.data().byteSize();
        }
    }
}
