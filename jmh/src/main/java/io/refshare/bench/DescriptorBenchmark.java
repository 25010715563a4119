package io.refshare.bench;

import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * The message of a send: a host tensor's {@link Descriptor} (float32, 512 x 512, in a pooled
 * segment, names of the real shape), encoded to the bytes a queue carries and decoded back
 * with the strict checks a receiver applies to bytes from another process.
 * <ul>
 * <li>{@code encode}: to a new {@code byte[]} ({@code Refshare.share}).</li>
 * <li>{@code encodeInPlace}: into an existing segment, as straight into a queue cell.</li>
 * <li>{@code decode}: {@code Refshare.receive}'s decoding (copy once, validate every field, build the record).</li>
 * </ul>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
@Threads(1)
@State(Scope.Thread)
public class DescriptorBenchmark {
    private Descriptor descriptor;
    private byte[] encoded;
    private MemorySegment cell;

    @Setup
    public void setUp() {
        ShmDirectory names = ShmDirectory.defaults(); // only for the shape of the names; nothing is created
        TensorLayout layout = TensorLayout.contiguous(DType.FLOAT32, 512, 512);
        descriptor = Descriptor.host(names.newName(ShmKind.SEGMENT), 32L << 20, 4096 + (3L << 20), layout.byteSpan(),
                names.newName(ShmKind.COUNTERS), 1234, layout, ProcessIdentity.current());
        encoded = DescriptorCodec.encode(descriptor);
        cell = Arena.ofAuto().allocate(DescriptorCodec.MAX_ENCODED_BYTES, 8);
    }

    @Benchmark
    public byte[] encode() {
        return DescriptorCodec.encode(descriptor);
    }

    @Benchmark
    public int encodeInPlace() {
        return DescriptorCodec.encode(descriptor, cell, 0);
    }

    @Benchmark
    public Descriptor decode() {
        return DescriptorCodec.decode(encoded);
    }
}
