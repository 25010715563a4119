package io.refshare.ucx.bench;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.Tensor;
import io.refshare.ucx.BridgeSecret;
import io.refshare.ucx.RemoteQueue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;

/**
 * The sending host's side of the cross-host bench, one run per process:
 * {@code ucx|socket throughput|latency SIZE COUNT DIR IP PORT SECRET}. Throughput: COUNT
 * messages of SIZE bytes as fast as they go (after a warm-up, see {@link #warmupMessages}), timed until
 * the receiving side has the last (bridge: delivered; socket: acknowledged), with this process's CPU time over
 * the same span; prints {@code T0} as the timed span starts and {@code R nanos cpuNanos bytes} after it. Latency: COUNT probes 1 ms apart,
 * stamped with the send time (the sink prints the one-way times).
 */
public final class BenchSource {
    private static final int POOL = 16;
    /** Each run warms up for at least this long, and for at least {@link #warmupMessages} messages. */
    private static final long WARMUP_NANOS = 4_000_000_000L;
    private static final int WARMUP_COMPILED_MESSAGES = 12_000;
    private static final long WARMUP_MAX_BYTES = 16L << 30;

    public static void main(String[] a) throws Exception {
        boolean ucx = a[0].equals("ucx");
        boolean throughput = a[1].equals("throughput");
        long size = Long.parseLong(a[2]);
        int count = Integer.parseInt(a[3]);
        InetSocketAddress to = new InetSocketAddress(a[5], Integer.parseInt(a[6]));
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(a[4])))) {
            Tensor[] pool = new Tensor[POOL];
            for (int i = 0; i < POOL; i++) {
                pool[i] = rs.allocateBytes(size);
                pool[i].data().fill((byte) (i + 1));
            }
            try {
                if (ucx) {
                    try (RemoteQueue q = RemoteQueue.connect(to, BridgeSecret.read(Path.of(a[7])), BenchSink.WINDOW,
                            Duration.ofSeconds(30))) {
                        runUcx(q, pool, count, throughput);
                    }
                } else {
                    try (SocketChannel c = SocketChannel.open(to)) {
                        c.setOption(StandardSocketOptions.TCP_NODELAY, true);
                        runSocket(c, pool, count, throughput);
                    }
                }
            } finally {
                for (Tensor t : pool) {
                    t.close();
                }
            }
        }
        System.out.flush();
    }

    private static void stamp(MemorySegment s, int flag) {
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, System.nanoTime());
        s.set(ValueLayout.JAVA_BYTE, 8, (byte) flag);
    }

    private static void runUcx(RemoteQueue q, Tensor[] pool, int count, boolean throughput) throws Exception {
        long warmupEnd = System.nanoTime() + WARMUP_NANOS;
        int warmup = 0;
        int atLeast = warmupMessages(pool[0].data().byteSize(), count);
        while (warmup < atLeast || System.nanoTime() - warmupEnd < 0) {
            stamp(pool[warmup % POOL].data(), BenchSink.FLAG_PLAIN);
            q.put(pool[warmup % POOL]);
            warmup++;
        }
        awaitDelivered(q, warmup);
        if (!throughput) {
            for (int i = 0; i < count; i++) {
                stamp(pool[i % POOL].data(), BenchSink.FLAG_PROBE);
                q.put(pool[i % POOL]);
                awaitDelivered(q, warmup + i + 1);
                LockSupport.parkNanos(1_000_000L);
            }
            return;
        }
        System.out.println("T0"); // the bench starts counting the receiving process's CPU here
        long cpu0 = cpu();
        long t0 = System.nanoTime();
        for (int i = 0; i < count; i++) {
            q.put(pool[i % POOL]);
        }
        awaitDelivered(q, warmup + count);
        long elapsed = System.nanoTime() - t0;
        long cpu = cpu() - cpu0;
        System.out.println("R " + elapsed + " " + cpu + " " + pool[0].data().byteSize() * count);
    }

    /**
     * The fewest warm-up messages of a run timing {@code count} messages of {@code size} bytes:
     * a quarter of the count, and {@value #WARMUP_COMPILED_MESSAGES} (at most
     * {@value #WARMUP_MAX_BYTES} bytes of them). This JVM is fresh, and the receiving one meets
     * the rendezvous path first at the first size above 64 KiB: its per-message methods reach
     * C2 only after some 5,000 to 9,000 messages (6 to 9 s into its life at 1 MiB, its
     * compilation log showed), so a quarter or 4 s alone timed the 1 MiB rows half compiled.
     */
    private static int warmupMessages(long size, int count) {
        long compiled = Math.min(WARMUP_COMPILED_MESSAGES, Math.max(1, WARMUP_MAX_BYTES / size));
        return (int) Math.max(Math.max(10, count / 4), compiled);
    }

    private static void awaitDelivered(RemoteQueue q, long n) {
        while (q.stats().delivered() < n) {
            Thread.yield();
        }
    }

    private static void runSocket(SocketChannel c, Tensor[] pool, int count, boolean throughput) throws Exception {
        ByteBuffer header = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer ack = ByteBuffer.allocateDirect(1);
        long warmupEnd = System.nanoTime() + WARMUP_NANOS;
        int warmup = 0;
        int atLeast = warmupMessages(pool[0].data().byteSize(), count);
        while (warmup < atLeast || System.nanoTime() - warmupEnd < 0) {
            send(c, header, pool[warmup % POOL].data(), BenchSink.FLAG_PLAIN);
            warmup++;
        }
        send(c, header, pool[warmup % POOL].data(), BenchSink.FLAG_LAST);
        ack.clear();
        BenchSink.readFully(c, ack);
        if (!throughput) {
            for (int i = 0; i < count; i++) {
                send(c, header, pool[i % POOL].data(), BenchSink.FLAG_PROBE);
                LockSupport.parkNanos(1_000_000L);
            }
            return;
        }
        System.out.println("T0"); // the bench starts counting the receiving process's CPU here
        long cpu0 = cpu();
        long t0 = System.nanoTime();
        for (int i = 0; i < count; i++) {
            send(c, header, pool[i % POOL].data(), i == count - 1 ? BenchSink.FLAG_LAST : BenchSink.FLAG_PLAIN);
        }
        ack.clear();
        BenchSink.readFully(c, ack);
        long elapsed = System.nanoTime() - t0;
        long cpu = cpu() - cpu0;
        System.out.println("R " + elapsed + " " + cpu + " " + pool[0].data().byteSize() * count);
    }

    private static void send(SocketChannel c, ByteBuffer header, MemorySegment data, int flag) throws Exception {
        stamp(data, flag);
        header.clear();
        header.putLong(0, data.byteSize());
        while (header.hasRemaining()) {
            c.write(header);
        }
        ByteBuffer body = data.asByteBuffer();
        while (body.hasRemaining()) {
            c.write(body);
        }
    }

    private static long cpu() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }
}
