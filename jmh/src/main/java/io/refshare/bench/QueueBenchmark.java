package io.refshare.bench;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One 1 KiB message through a queue, in one thread: {@code put} by a producer's handle, then
 * {@code take}, first byte read and {@code close} by a consumer's handle of another
 * {@link Refshare} (its own mappings, as another process has). Run with {@code -prof gc} for the
 * bytes allocated per put and take; no cross-core hand-off or wake-up is in it.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@Threads(1)
@State(Scope.Thread)
public class QueueBenchmark {
    private ShmTemp temp;
    private Refshare producer;
    private Refshare consumer;
    private ShareQueue out;
    private ShareQueue in;
    private Tensor tensor;
    private List<Tensor> batch;
    private final List<Tensor> drained = new ArrayList<>(BATCH);

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        temp = ShmTemp.create();
        RefshareConfig config = RefshareConfig.defaults().withDirectory(temp.path());
        producer = Refshare.open(config);
        consumer = Refshare.open(config);
        out = producer.createQueue(64);
        in = consumer.openQueue(out.name());
        tensor = producer.allocateBytes(1024);
        tensor.data().fill((byte) 0x5A);
        batch = Collections.nCopies(BATCH, tensor);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        tensor.close();
        in.close();
        out.close(Duration.ZERO);
        consumer.close();
        producer.close();
        temp.delete();
    }

    @Benchmark
    public byte putTakeReadClose() throws InterruptedException {
        out.put(tensor);
        try (Tensor received = in.take()) {
            return received.data().get(ValueLayout.JAVA_BYTE, 0);
        }
    }

    /**
     * As {@link #putTakeReadClose}, with a fresh 1 KiB tensor for every message, as a producer
     * of new data has: allocated, its first byte written, put and dropped at once (its block
     * waits in the limbo until the consumer's close gives its reference back, and the
     * background collector then frees it while the next messages go through).
     */
    @Benchmark
    public byte freshPutTakeReadClose() throws InterruptedException {
        try (Tensor fresh = producer.allocateBytes(1024)) {
            fresh.data().set(ValueLayout.JAVA_BYTE, 0, (byte) 0x5A);
            out.put(fresh);
        }
        try (Tensor received = in.take()) {
            return received.data().get(ValueLayout.JAVA_BYTE, 0);
        }
    }

    /** Tensors per batch in {@link #batchPutDrainReadClose}, as in {@code refshare bench}'s batch row. */
    static final int BATCH = 32;

    /**
     * A batch of {@value #BATCH} references to the one tensor through the queue, as the bench's
     * batch row streams them: one {@code putAll}, then a {@code take} and a
     * {@code drainTo} of the rest, each tensor's first byte read and each closed. The score is
     * per tensor.
     */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int batchPutDrainReadClose() throws InterruptedException {
        out.putAll(batch);
        drained.add(in.take());
        in.drainTo(drained, BATCH - 1);
        int sum = 0;
        for (Tensor t : drained) {
            sum += t.data().get(ValueLayout.JAVA_BYTE, 0);
            t.close();
        }
        drained.clear();
        return sum;
    }
}
