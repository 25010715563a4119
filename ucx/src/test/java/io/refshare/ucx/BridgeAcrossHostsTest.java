package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The bridge between two "hosts" (network namespaces joined by a veth pair, each with its own
 * shared-memory directory), over UCX's TCP transport, with real processes: a sending bridge
 * in host A forwarding a queue this test fills (as host A's producer), a receiving bridge in
 * host B putting copies on a queue this test takes from (as host B's consumer).
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class BridgeAcrossHostsTest {
    private static final String PORT = "13370";
    private static final String SECRET = "a shared secret of some length";

    private static Refshare open(Path dir) {
        return Refshare.open(RefshareConfig.defaults().withDirectory(dir));
    }

    private static BridgeChild receiver(TwoHosts h, Path secret, int capacity, int window) throws Exception {
        return h.start(h.nsB, BridgeProcessMain.class, "receive", h.shmB.toString(), TwoHosts.IP_B, PORT,
                secret.toString(), Integer.toString(capacity), Integer.toString(window));
    }

    private static BridgeChild sender(TwoHosts h, String queue, Path secret, int window) {
        return h.start(h.nsA, BridgeProcessMain.class, "send", h.shmA.toString(), queue, TwoHosts.IP_B, PORT,
                secret.toString(), Integer.toString(window));
    }

    /** Deterministic bytes for tensor {@code i}: each 8-byte word is a mix of i and its position. */
    private static void fill(MemorySegment s, int i) {
        long words = s.byteSize() / 8;
        for (long w = 0; w < words; w++) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, w * 8, mix(i, w));
        }
        for (long b = words * 8; b < s.byteSize(); b++) {
            s.set(ValueLayout.JAVA_BYTE, b, (byte) mix(i, b));
        }
    }

    private static void check(MemorySegment s, int i) {
        long words = s.byteSize() / 8;
        for (long w = 0; w < words; w++) {
            long v = s.get(ValueLayout.JAVA_LONG_UNALIGNED, w * 8);
            if (v != mix(i, w)) {
                throw new AssertionError("tensor " + i + " differs at byte " + w * 8);
            }
        }
        for (long b = words * 8; b < s.byteSize(); b++) {
            assertEquals((byte) mix(i, b), s.get(ValueLayout.JAVA_BYTE, b));
        }
    }

    private static long mix(long i, long w) {
        long x = i * 0x9E3779B97F4A7C15L + w;
        x ^= x >>> 31;
        return x * 0xBF58476D1CE4E5B9L;
    }

    private static void assertNoFilesLeft(Path dir) throws Exception {
        try (Stream<Path> files = Files.list(dir)) {
            List<Path> left = files.toList();
            assertTrue(left.isEmpty(), "left behind in " + dir + ": " + left);
        }
    }

    @Test
    void tensorsFrom1KiBTo256MiBArriveByteExact() throws Exception {
        long[] sizes = {1024, 65536, 1 << 20, 16 << 20, 256L << 20};
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", SECRET);
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(4)) {
                BridgeChild recv = receiver(h, secret, 4, 8);
                String qb = recv.expect("ready ", 30).substring(6);
                BridgeChild send = sender(h, qa.name(), secret, 8);
                send.expect("connected", 30);
                try (Refshare rsB = open(h.shmB); ShareQueue b = rsB.openQueue(qb)) {
                    Thread producer = Thread.ofPlatform().start(() -> {
                        try {
                            for (int i = 0; i < sizes.length; i++) {
                                try (Tensor t = rsA.allocateBytes(sizes[i])) {
                                    fill(t.data(), i);
                                    qa.put(t);
                                }
                            }
                            // a non-contiguous view: its layout and bytes cross as they are
                            try (Tensor m = rsA.allocate(DType.FLOAT64, 64, 32); Tensor v = m.transpose(0, 1)) {
                                fill(m.data(), 99);
                                qa.put(v);
                            }
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    });
                    for (int i = 0; i < sizes.length; i++) {
                        try (Tensor t = b.poll(60, TimeUnit.SECONDS)) {
                            assertNotNull(t, "tensor " + i + " of " + sizes[i] + " bytes did not arrive");
                            assertEquals(sizes[i], t.data().byteSize());
                            check(t.data(), i);
                        }
                    }
                    try (Tensor v = b.poll(30, TimeUnit.SECONDS)) {
                        assertNotNull(v);
                        assertArrayEquals(new long[]{32, 64}, v.shape());
                        assertArrayEquals(new long[]{1, 32}, v.layout().strides());
                        check(v.data(), 99);
                    }
                    producer.join();
                    assertEquals(sizes.length + 1, send.statLong("delivered"));
                    assertEquals(0, send.statLong("unconfirmed"));
                    assertEquals(0, send.quit(30));
                    assertEquals(1, recv.statLong("ends"), "the sender said the stream ended");
                    assertEquals(0, recv.quit(30));
                }
                assertTrue(rsA.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference the bridge held is back");
            }
            assertNoFilesLeft(h.shmA);
            assertNoFilesLeft(h.shmB);
        }
    }

    /** A Python consumer on the receiving host takes what crossed, as from any producer. */
    @Test
    void aPythonConsumerOnTheReceivingHostTakesThem() throws Exception {
        Path python = Path.of("/usr/bin/python3");
        Path pkg = Path.of("..", "python").toAbsolutePath().normalize();
        assertTrue(Files.isExecutable(python) && Files.isDirectory(pkg.resolve("refshare")),
                "needs Debian's python3 and the python/ package (./run-tests installs numpy)");
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", SECRET);
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(4)) {
                BridgeChild recv = receiver(h, secret, 4, 8);
                String qb = recv.expect("ready ", 30).substring(6);
                BridgeChild send = sender(h, qa.name(), secret, 8);
                send.expect("connected", 30);
                String script = String.join("\n",
                        "import refshare",
                        "with refshare.open(directory='" + h.shmB + "') as rs, rs.open_queue('" + qb + "') as q:",
                        "    for i in range(3):",
                        "        t = q.take()",
                        "        with t:",
                        "            a = t.numpy()",
                        "            print('T', a.dtype, a.shape, float(a.sum()), flush=True)");
                BridgeChild py = h.startProgram(h.nsB, "python-consumer", List.of(python.toString(), "-c", script),
                        java.util.Map.of("PYTHONPATH", pkg.toString()));
                for (int i = 0; i < 3; i++) {
                    try (Tensor t = rsA.allocate(DType.FLOAT32, 8, 8)) {
                        for (int k = 0; k < 64; k++) {
                            t.data().setAtIndex(ValueLayout.JAVA_FLOAT, k, i + 0.5f);
                        }
                        qa.put(t);
                    }
                }
                for (int i = 0; i < 3; i++) {
                    assertEquals("T float32 (8, 8) " + 64 * (i + 0.5), py.expect("T ", 60));
                }
                awaitStat(send, "delivered", v -> v == 3);
                assertEquals(0, send.quit(30));
                assertEquals(0, recv.quit(30));
                py.close();
                assertTrue(rsA.awaitLimboEmpty(Duration.ofSeconds(10)));
            }
        }
    }

    @Test
    void aWrongSecretIsRefused() throws Exception {
        try (TwoHosts h = TwoHosts.create()) {
            Path good = h.secret("good", SECRET);
            Path bad = h.secret("bad", "not the secret the receiver has");
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(4)) {
                BridgeChild recv = receiver(h, good, 4, 8);
                recv.expect("ready ", 30);
                BridgeChild send = sender(h, qa.name(), bad, 8);
                String failed = send.expect("failed", 30);
                assertTrue(failed.contains("secret"), failed);
                // the receiver counts the refusal when it drops the link, which may be after the
                // sender has reported it
                awaitStat(recv, "refused", v -> v == 1);
                assertEquals(0, recv.statLong("accepted"));
                assertEquals(0, recv.quit(30));
                send.close();
            }
            assertNoFilesLeft(h.shmB);
        }
    }

    /**
     * The receiving bridge is killed while the sender has offers out: the sender sees it
     * within about a second and releases exactly those references; a new receiving bridge on
     * the same address gets the rest (the sender reconnects by itself).
     */
    @Test
    void remoteBridgeKilledTheSenderReclaimsExactlyAndResumes() throws Exception {
        int total = 12;
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", SECRET);
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(total)) {
                BridgeChild recv = receiver(h, secret, 2, 4);
                recv.expect("ready ", 30);
                BridgeChild send = sender(h, qa.name(), secret, 4);
                send.expect("connected", 30);
                for (int i = 0; i < total; i++) {
                    try (Tensor t = rsA.allocateBytes(4096)) {
                        fill(t.data(), i);
                        qa.put(t);
                    }
                }
                // nobody takes on host B: its queue (2) fills, then the window (4) holds the sender back
                // (a fresh receiving JVM on a busy machine may take longer than a moment to queue the first two)
                awaitStat(send, "delivered", v -> v >= 2);
                awaitStat(send, "offered", v -> v >= 4);
                Thread.sleep(300);
                long offered = send.statLong("offered");
                long delivered = send.statLong("delivered");
                assertEquals(2, delivered, "only the remote queue's capacity is confirmed");
                assertTrue(offered <= delivered + 4, "the window bounds what is out: " + offered);
                recv.kill();
                long killed = System.nanoTime();
                awaitStat(send, "unconfirmed", v -> v == offered - delivered);
                long seen = (System.nanoTime() - killed) / 1_000_000;
                assertTrue(seen < 3000, "the sender saw the loss after " + seen + " ms");
                // the receiving bridge died with its copies: host B's janitor territory; start a fresh host B side
                BridgeChild recv2 = receiver(h, secret, total, 4);
                String qb = recv2.expect("ready ", 30).substring(6);
                awaitStat(send, "connects", v -> v == 2);
                try (Refshare rsB = open(h.shmB); ShareQueue b = rsB.openQueue(qb)) {
                    long rest = total - offered;
                    List<Integer> seenIds = new ArrayList<>();
                    for (long k = 0; k < rest; k++) {
                        try (Tensor t = b.poll(30, TimeUnit.SECONDS)) {
                            assertNotNull(t, "after reconnecting, tensor " + k + " of " + rest + " did not arrive");
                            seenIds.add(identify(t.data(), total));
                        }
                    }
                    for (int k = 0; k < seenIds.size(); k++) {
                        assertEquals((int) offered + k, seenIds.get(k), "the ones never offered come next, in order");
                    }
                    // the confirmation of the last one may still be on its way
                    waitFor(() -> send.statLong("delivered") + send.statLong("unconfirmed"), v -> v == total);
                    assertEquals(0, send.quit(30));
                    assertEquals(0, recv2.quit(30));
                }
                assertTrue(rsA.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference the bridge held is back");
            }
            assertNoFilesLeft(h.shmA);
        }
    }

    /**
     * A consumer on the receiving host takes tensors and is SIGKILLed holding them: the
     * receiving bridge (their producer there) reclaims them, the sender was already released
     * on delivery, and the stream goes on.
     */
    @Test
    void remoteConsumerKilledIsReclaimedOnItsHost() throws Exception {
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", SECRET);
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(16)) {
                BridgeChild recv = receiver(h, secret, 8, 8);
                String qb = recv.expect("ready ", 30).substring(6);
                BridgeChild send = sender(h, qa.name(), secret, 8);
                send.expect("connected", 30);
                for (int i = 0; i < 6; i++) {
                    try (Tensor t = rsA.allocateBytes(1 << 16)) {
                        fill(t.data(), i);
                        qa.put(t);
                    }
                }
                BridgeChild consumer = h.start(h.nsB, HoldingConsumerMain.class, h.shmB.toString(), qb, "3");
                consumer.expect("holding 3", 30);
                awaitStat(send, "delivered", v -> v == 6);
                assertTrue(rsA.awaitLimboEmpty(Duration.ofSeconds(10)), "delivered tensors are released on host A");
                consumer.kill();
                awaitStat(recv, "reclaimed", v -> v == 3);
                try (Refshare rsB = open(h.shmB); ShareQueue b = rsB.openQueue(qb)) {
                    for (int i = 3; i < 6; i++) {
                        try (Tensor t = b.poll(30, TimeUnit.SECONDS)) {
                            assertNotNull(t);
                            check(t.data(), i);
                        }
                    }
                }
                awaitStat(recv, "limbo", v -> v == 0);
                assertEquals(0, send.quit(30));
                assertEquals(0, recv.quit(30));
            }
            assertNoFilesLeft(h.shmA);
        }
    }

    /**
     * The cable is cut: both sides report the silence within about two seconds, the sender
     * releases what it had offered, and after the cable is back it reconnects and the rest
     * arrives.
     */
    @Test
    void linkCutReportsReturnsReferencesAndReconnects() throws Exception {
        int total = 10;
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", SECRET);
            try (Refshare rsA = open(h.shmA); ShareQueue qa = rsA.createQueue(total)) {
                BridgeChild recv = receiver(h, secret, 2, 4);
                String qb = recv.expect("ready ", 30).substring(6);
                BridgeChild send = sender(h, qa.name(), secret, 4);
                send.expect("connected", 30);
                for (int i = 0; i < total; i++) {
                    try (Tensor t = rsA.allocateBytes(8192)) {
                        fill(t.data(), i);
                        qa.put(t);
                    }
                }
                awaitStat(send, "delivered", v -> v == 2);
                Thread.sleep(300);
                long offered = send.statLong("offered");
                h.link(false);
                awaitStat(send, "unconfirmed", v -> v == offered - 2);
                String sendError = waitFor(() -> send.stat("error"), e -> e.contains("silent"));
                assertTrue(sendError.contains("silent"), sendError);
                awaitStat(recv, "accepted", v -> v == 1);
                String recvError = waitFor(() -> recv.stat("error"), e -> e.contains("silent"));
                assertTrue(recvError.contains("silent"), recvError);
                h.link(true);
                awaitStat(send, "connects", v -> v == 2);
                try (Refshare rsB = open(h.shmB); ShareQueue b = rsB.openQueue(qb)) {
                    // what arrived before the cut (2 delivered, maybe more copies completed) and the rest after
                    int got = 0;
                    while (true) {
                        Tensor next = b.poll(5, TimeUnit.SECONDS);
                        if (next == null) {
                            break;
                        }
                        try (Tensor t = next) {
                            identify(t.data(), total);
                            got++;
                        }
                        if (send.statLong("delivered") + send.statLong("unconfirmed") == total
                                && got >= total - (offered - 2)) {
                            break;
                        }
                    }
                    assertEquals(total, send.statLong("delivered") + send.statLong("unconfirmed"));
                }
                assertEquals(0, send.quit(30));
                assertEquals(0, recv.quit(30));
                assertTrue(rsA.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference the bridge held is back");
            }
            assertNoFilesLeft(h.shmA);
        }
    }

    private static int identify(MemorySegment s, int total) {
        long first = s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        for (int i = 0; i < total; i++) {
            if (mix(i, 0) == first) {
                check(s, i);
                return i;
            }
        }
        throw new AssertionError("a tensor no one sent arrived");
    }

    interface Probe<T> {
        T get() throws Exception;
    }

    private static <T> T waitFor(Probe<T> probe, java.util.function.Predicate<T> ok) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        T v = probe.get();
        while (!ok.test(v)) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("still " + v + " after 20 s");
            }
            Thread.sleep(50);
            v = probe.get();
        }
        return v;
    }

    private static void awaitStat(BridgeChild c, String key, java.util.function.LongPredicate ok) throws Exception {
        waitFor(() -> c.statLong(key), ok::test);
    }
}
