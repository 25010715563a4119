package io.refshare;

import io.refshare.bench.ShmTemp;

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
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;

/**
 * The CPU cost of one message without a second process: what {@code refshare bench}'s
 * send &rarr; take &rarr; first read costs before any cross-core hand-off or wake-up. A 1 KiB
 * tensor is shared again and again (as "refshare reuse" does) and received by the same
 * process, which maps the segment and the counter file a second time, as a consumer does.
 * <ul>
 * <li>{@code shareAndCancel}: the sender's side without encoding: a token handed out and a
 *     {@link Descriptor} built ({@code Refshare.shareDescriptor}), then the token returned.</li>
 * <li>{@code shareReceiveReadClose}: the whole message: {@code share} (token, descriptor,
 *     encoding), {@code receive} (decoding, the mapped segment looked up, the token claimed),
 *     the first byte read, {@code close} (the token released).</li>
 * </ul>
 * The queue (a copy of the encoded bytes into a ring cell and out) is not included.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@Threads(1)
@State(Scope.Thread)
public class MessageBenchmark {
    private ShmTemp temp;
    private Refshare rs;
    private Tensor tensor;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        temp = ShmTemp.create();
        rs = Refshare.open(RefshareConfig.defaults().withDirectory(temp.path()));
        tensor = rs.allocateBytes(1024);
        tensor.data().fill((byte) 0x5A);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        tensor.close();
        rs.close();
        temp.delete();
    }

    @Benchmark
    public boolean shareAndCancel() {
        Descriptor d = rs.shareDescriptor(tensor);
        return rs.sharing().cancel(d);
    }

    @Benchmark
    public byte shareReceiveReadClose() {
        byte[] message = rs.share(tensor);
        try (Tensor received = rs.receive(message)) {
            return received.data().get(ValueLayout.JAVA_BYTE, 0);
        }
    }
}
