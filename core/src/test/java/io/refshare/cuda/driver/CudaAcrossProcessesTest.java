package io.refshare.cuda.driver;

import io.refshare.stats.CudaStats;
import io.refshare.cuda.CudaConfig;
import io.refshare.Internals;
import io.refshare.tensor.Device;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Device memory shared across real processes: this JVM produces, consumers are child JVMs
 * ({@link CudaPeerMain}) that receive the descriptors on their stdin. Runs against the test
 * double, or a real driver (see {@link CudaTestSupport}); the double also lets the tests
 * count driver calls and hold the producer's stream.
 */
class CudaAcrossProcessesTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final Device CUDA = Device.cuda(0);

    static ChildJvm consumer(TempShm shm) {
        return ChildJvm.start(CudaChildMain.class, "CudaPeerMain", shm.path().toString(), CudaTestSupport.library(),
                CudaTestSupport.isDouble() ? "double" : "real");
    }

    /** The double (files in the test's directory, so a leak fails the test), or null against a real driver. */
    static TestDouble testDouble(TempShm shm) {
        if (!CudaTestSupport.isDouble()) {
            return null;
        }
        TestDouble td = CudaTestSupport.testDouble();
        td.configure(shm.path(), -1, -1);
        return td;
    }

    static void fill(Refshare rs, Tensor t, long seed) {
        if (!t.isCuda()) {
            Patterns.fill(t.data(), seed);
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(t.layout().byteSpan());
            Patterns.fill(host, seed);
            rs.cuda().copyFromHost(host, t);
        }
    }

    static String send(ChildJvm c, String command) {
        c.send(command);
        String answer = c.read();
        if (answer.startsWith("ERROR")) {
            throw new AssertionError("consumer failed '" + command.split(" ")[0] + "': " + answer);
        }
        return answer;
    }

    static long[] numbers(String answer, String prefix) {
        assertTrue(answer.startsWith(prefix + " "), answer);
        return Arrays.stream(answer.substring(prefix.length() + 1).split(" ")).mapToLong(Long::parseLong).toArray();
    }

    static void exit(ChildJvm c) {
        // -1 against a real driver; with the double, no misuse was recorded in the consumer
        assertTrue(numbers(send(c, "DOUBLE violations"), "DOUBLE")[0] <= 0, "the test double recorded a misuse in a"
                + " consumer (its stderr has the text)");
        assertEquals("BYE", send(c, "EXIT"));
        assertEquals(0, c.waitFor());
    }

    @Test
    void tensorsSubAllocatedInOneSegmentReachTwoConsumersByteForByte() throws InterruptedException {
        CudaTestSupport.require();
        long[] sizes = {1000, 4096, 65_536, 262_144, 524_288};
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            long allocsBefore = td == null ? 0 : td.counter("cuMemAlloc");
            long handlesBefore = td == null ? 0 : td.counter("cuIpcGetMemHandle");
            long opensBefore = td == null ? 0 : td.counter("cuIpcOpenMemHandle");
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm a = consumer(shm); ChildJvm b = consumer(shm)) {
                List<Descriptor> sent = new ArrayList<>();
                for (int i = 0; i < sizes.length; i++) {
                    try (Tensor t = rs.allocate(CUDA, DType.UINT8, sizes[i])) {
                        fill(rs, t, 100 + i);
                        for (ChildJvm c : List.of(a, b)) {
                            byte[] message = rs.share(t);
                            sent.add(DescriptorCodec.decode(message));
                            String answer = send(c, "RECV t" + i + " " + (100 + i) + " " + HEX.formatHex(message));
                            assertEquals("OK t" + i, answer);
                        }
                    } // dropped while both consumers hold it
                }
                // one segment, one handle, carved at distinct offsets
                Descriptor first = sent.getFirst();
                Set<Long> offsets = new HashSet<>();
                for (Descriptor d : sent) {
                    assertEquals(Backend.CUDA, d.backend());
                    assertEquals(first.segmentName(), d.segmentName());
                    assertArrayEquals(first.memoryHandle(), d.memoryHandle());
                    assertTrue(d.hasEvent(), "ordered by an event");
                    offsets.add(d.offset());
                }
                assertEquals(sizes.length, offsets.size(), "each tensor at its own offset");
                assertEquals(1, rs.cuda().stats().allocator().segmentCreations());
                if (td != null) {
                    assertEquals(1, td.counter("cuMemAlloc") - allocsBefore);
                    assertEquals(1, td.counter("cuIpcGetMemHandle") - handlesBefore, "the handle is taken once");
                }
                assertEquals(sizes.length, rs.stats().limboBlocks(), "dropped shared blocks wait in the limbo");
                assertEquals(2L * sizes.length, Internals.sharing(rs).liveCounts());

                // the producer keeps allocating and writing: the limbo's blocks are not handed out again
                for (long size : sizes) {
                    try (Tensor t = rs.allocate(CUDA, DType.UINT8, size)) {
                        fill(rs, t, -1);
                    }
                }
                for (ChildJvm c : List.of(a, b)) {
                    for (int i = 0; i < sizes.length; i++) {
                        assertEquals("OK t" + i, send(c, "VERIFY t" + i + " " + (100 + i)));
                    }
                    // opened once for all five blocks, and waited for each block's event
                    assertArrayEquals(new long[] {1, 1, 0, sizes.length}, numbers(send(c, "CUDA"), "CUDA"));
                    if (td != null) {
                        assertArrayEquals(new long[] {1, 1}, numbers(send(c, "DOUBLE cuIpcOpenMemHandle liveMappings"),
                                "DOUBLE"));
                    }
                }

                // forwarded back to its producer: the producer uses its own memory, never IPC-opening it
                String forwarded = send(a, "FORWARD t2").substring("FORWARDED ".length());
                try (Tensor back = rs.receive(HEX.parseHex(forwarded)); Arena arena = Arena.ofConfined()) {
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(back, arena), 102));
                    assertEquals(0, rs.cuda().stats().ipcOpens());
                }
                if (td != null) {
                    assertEquals(opensBefore, td.counter("cuIpcOpenMemHandle"), "no IPC open in the producer");
                }

                for (ChildJvm c : List.of(a, b)) {
                    for (int i = 0; i < sizes.length; i++) {
                        assertEquals("CLOSED t" + i, send(c, "CLOSE t" + i));
                    }
                    assertArrayEquals(new long[] {0, 1, 1, sizes.length}, numbers(send(c, "CUDA"), "CUDA"),
                            "the segment is closed with its last block");
                    assertEquals("MAPPED 0", send(c, "MAPPED cuda"));
                }
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "every consumer closed: the limbo empties");
                CudaStats s = rs.cuda().stats();
                assertEquals(0, Internals.sharing(rs).liveCounts());
                assertEquals(0, s.allocator().blocksInUse());
                assertEquals(0, s.liveEvents(), "events go with their blocks");
                assertEquals(s.eventsCreated(), s.eventsDestroyed());
                exit(a);
                exit(b);
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
        } // TempShm: no counter file, segment or event file of the double is left
    }

    /** What {@link #script} observes, with host memory and with device memory alike. */
    private static final List<String> EXPECTED_TRACE = List.of(
            "shared to both: limbo 0, blocks in use 3, segments 2, live references 6, consumer segments 2 / 2",
            "dropped by the producer: limbo 3, blocks in use 3, segments 2, live references 6, consumer segments 2 / 2",
            "one consumer closed t0: limbo 3, blocks in use 3, segments 2, live references 5, consumer segments 2 / 2",
            "both closed t0: limbo 2, blocks in use 2, segments 2, live references 4, consumer segments 2 / 2",
            "extra held by a: limbo 3, blocks in use 3, segments 2, live references 5, consumer segments 2 / 2",
            "all closed, producer trimmed: limbo 0, blocks in use 0, segments 0, live references 0,"
                    + " consumer segments 0 / 0");

    /**
     * The same script with host memory and with device memory: the limbo, the block counts,
     * the live references and the consumers' mappings go through the same values.
     */
    @Test
    void limboAndCountsMatchTheHostBackend() throws InterruptedException {
        CudaTestSupport.require();
        assertEquals(String.join("\n", EXPECTED_TRACE), String.join("\n", script(Device.HOST)), "host memory");
        assertEquals(String.join("\n", EXPECTED_TRACE), String.join("\n", script(CUDA)), "device memory");
    }

    private static List<String> script(Device device) throws InterruptedException {
        List<String> trace = new ArrayList<>();
        try (TempShm shm = new TempShm()) {
            testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm a = consumer(shm); ChildJvm b = consumer(shm)) {
                long[] sizes = {4096, 100_000, 3 << 20}; // two small blocks of one segment, one large segment
                List<Tensor> tensors = new ArrayList<>();
                for (int i = 0; i < sizes.length; i++) {
                    Tensor t = rs.allocate(device, DType.UINT8, sizes[i]);
                    fill(rs, t, i);
                    tensors.add(t);
                    for (ChildJvm c : List.of(a, b)) {
                        assertEquals("OK t" + i, send(c, "RECV t" + i + " " + i + " " + HEX.formatHex(rs.share(t))));
                    }
                }
                observe("shared to both", trace, rs, device, a, b);
                tensors.forEach(Tensor::close);
                observe("dropped by the producer", trace, rs, device, a, b);
                send(a, "CLOSE t0");
                rs.collect();
                observe("one consumer closed t0", trace, rs, device, a, b);
                send(b, "CLOSE t0");
                rs.collect();
                observe("both closed t0", trace, rs, device, a, b);

                // a message returned unreceived, and a message received twice: refused, nothing counted
                try (Tensor extra = rs.allocate(device, DType.UINT8, 512)) {
                    byte[] message = rs.share(extra);
                    assertTrue(rs.cancel(message));
                    assertTrue(send(a, "REFUSE " + HEX.formatHex(message)).startsWith("REFUSED message already"));
                    fill(rs, extra, 9);
                    byte[] twice = rs.share(extra);
                    assertEquals("OK x", send(a, "RECV x 9 " + HEX.formatHex(twice)));
                    assertTrue(send(b, "REFUSE " + HEX.formatHex(twice)).startsWith("REFUSED message already"));
                }
                observe("extra held by a", trace, rs, device, a, b);
                send(a, "CLOSE x");
                for (ChildJvm c : List.of(a, b)) {
                    send(c, "CLOSE t1");
                    send(c, "CLOSE t2");
                }
                // every block disposed of before the trim: a collect alone can return while the background
                // collector is still disposing of the last block, whose segment the trim would then keep
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                // host consumers keep idle segments mapped until the producer removes them
                rs.trim();
                observe("all closed, producer trimmed", trace, rs, device, a, b);
                exit(a);
                exit(b);
            }
        }
        return trace;
    }

    /**
     * Records the state after a step. The limbo counts a block until it is disposed of, and the
     * background collector may be disposing of one when the test collects: the state is read
     * again (collecting each time) until it is the expected one, or 10 s passed (then the
     * last reading goes into the trace, and the comparison shows it).
     */
    private static void observe(String step, List<String> trace, Refshare rs, Device device, ChildJvm a, ChildJvm b) {
        String expected = EXPECTED_TRACE.get(trace.size());
        long deadline = System.nanoTime() + 10_000_000_000L;
        String seen;
        while (!(seen = state(step, rs, device, a, b)).equals(expected) && System.nanoTime() < deadline) {
            rs.collect();
            Thread.onSpinWait();
        }
        trace.add(seen);
    }

    private static String state(String step, Refshare rs, Device device, ChildJvm a, ChildJvm b) {
        String kind = device.isHost() ? "host" : "cuda";
        var allocator = device.isHost() ? rs.stats().allocator() : rs.cuda().stats().allocator();
        return step + ": limbo " + rs.stats().limboBlocks() + ", blocks in use " + allocator.blocksInUse()
                + ", segments " + allocator.segments() + ", live references " + Internals.sharing(rs).liveCounts()
                + ", consumer segments " + numbers(send(a, "MAPPED " + kind), "MAPPED")[0] + " / "
                + numbers(send(b, "MAPPED " + kind), "MAPPED")[0];
    }

    /** The consumer's receive waits for the producer's event: it cannot read before the producer's copy ran. */
    @Test
    void aConsumerWaitsForTheProducersEvent() throws InterruptedException {
        CudaTestSupport.requireDouble("hold the producer's stream");
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm c = consumer(shm);
                 Arena arena = Arena.ofShared()) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 256 << 10);
                fill(rs, t, 7); // what a consumer reading too early would see
                MemorySegment written = arena.allocate(256 << 10);
                Patterns.fill(written, 42);
                String waiting;
                td.pause(true);
                try {
                    rs.cuda().copyFromHostAsync(written, t); // queued behind the pause: the device still holds 7
                    byte[] message = rs.share(t);            // records the event after the copy
                    assertTrue(td.pending() >= 2, "the copy and the record wait on the held stream");
                    waiting = send(c, "TAKE t " + HEX.formatHex(message));
                } finally {
                    td.pause(false);
                }
                assertTrue(numbers(waiting, "WAITING t")[0] >= 1, "the receive polled our unfinished event: " + waiting);
                assertEquals("TAKEN t", send(c, "JOINTAKE t"), "the receive returned once the event completed");
                assertEquals("OK t", send(c, "VERIFY t 42"), "the consumer read after the producer's copy");
                assertArrayEquals(new long[] {0, 1, 0}, numbers(send(c,
                        "DOUBLE cuStreamWaitEvent cuIpcOpenEventHandle blockedWaits"), "DOUBLE"),
                        "the event was polled by the receive, never waited for by the consumer's stream");
                t.close();
                assertEquals("CLOSED t", send(c, "CLOSE t"));
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                exit(c);
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /**
     * Ordering that a real GPU can show too: the producer queues a large asynchronous copy and
     * sends at once, without synchronizing; the consumer copies the tensor back and must see
     * every byte of it. Without the event wait it would race the copy (with the double, each
     * stream copy takes a while, so it would lose).
     */
    @Test
    void aConsumerReadsAfterALargeAsyncCopy() throws InterruptedException {
        CudaTestSupport.require();
        long bytes = 32L << 20;
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm c = consumer(shm);
                 Arena arena = Arena.ofShared()) {
                for (int round = 0; round < 3; round++) {
                    Tensor t = rs.allocate(CUDA, DType.UINT8, bytes);
                    MemorySegment host = arena.allocate(bytes);
                    Patterns.fill(host, 70 + round);
                    rs.cuda().copyFromHostAsync(host, t); // queued, not waited for
                    assertEquals("OK r" + round, send(c, "RECV r" + round + " " + (70 + round) + " "
                            + HEX.formatHex(rs.share(t))), "the consumer read after the producer's copy");
                    t.close();
                    assertEquals("CLOSED r" + round, send(c, "CLOSE r" + round));
                }
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                exit(c);
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
        }
    }

    /** Beyond the live-event cap a send synchronizes the stream instead; events go when their blocks are freed. */
    @Test
    void overTheEventCapASendSynchronizesInstead() throws InterruptedException {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            RefshareConfig config = shm.config().withCuda(CudaConfig.defaults().withMaxLiveEvents(2));
            try (Refshare rs = Refshare.open(config); ChildJvm c = consumer(shm)) {
                List<Tensor> tensors = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    Tensor t = rs.allocate(CUDA, DType.INT64, 1024);
                    fill(rs, t, 50 + i);
                    tensors.add(t);
                }
                long createsBefore = td == null ? 0 : td.counter("cuEventCreate");
                long syncsBefore = td == null ? 0 : td.counter("cuStreamSynchronize");
                int[] order = {0, 1, 2, 3, 0};
                boolean[] withEvent = new boolean[order.length];
                for (int k = 0; k < order.length; k++) {
                    byte[] message = rs.share(tensors.get(order[k]));
                    withEvent[k] = DescriptorCodec.decode(message).hasEvent();
                    String answer = send(c, "RECV m" + k + " " + (50 + order[k]) + " " + HEX.formatHex(message));
                    assertEquals("OK m" + k, answer);
                }
                // t0 and t1 get events (t0's is re-recorded for its second send); t2 and t3 find the cap reached
                assertArrayEquals(new boolean[] {true, true, false, false, true}, withEvent);
                CudaStats s = rs.cuda().stats();
                assertEquals(2, s.eventsCreated());
                assertEquals(2, s.liveEvents());
                assertEquals(3, s.eventSends());
                assertEquals(2, s.syncSends());
                assertEquals(3, numbers(send(c, "CUDA"), "CUDA")[3], "the consumer waited for the 3 events");
                if (td != null) {
                    assertEquals(2, td.counter("cuEventCreate") - createsBefore);
                    assertEquals(2, td.counter("cuStreamSynchronize") - syncsBefore, "one synchronize per capped send");
                }

                tensors.forEach(Tensor::close);
                rs.collect();
                assertEquals(2, rs.cuda().stats().liveEvents(), "events live while their blocks are in the limbo");
                for (int k = 0; k < order.length; k++) {
                    assertEquals("CLOSED m" + k, send(c, "CLOSE m" + k));
                }
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                s = rs.cuda().stats();
                assertEquals(0, s.liveEvents(), "destroyed when their blocks were freed");
                assertEquals(2, s.eventsDestroyed());
                // room under the cap again: the next send has an event
                try (Tensor t = rs.allocate(CUDA, DType.INT64, 1024)) {
                    fill(rs, t, 60);
                    byte[] message = rs.share(t);
                    assertTrue(DescriptorCodec.decode(message).hasEvent());
                    assertEquals("OK again", send(c, "RECV again 60 " + HEX.formatHex(message)));
                    assertEquals("CLOSED again", send(c, "CLOSE again"));
                }
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                assertEquals(0, rs.cuda().stats().liveEvents());
                assertEquals(3, rs.cuda().stats().eventsCreated());
                exit(c);
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
        }
    }
}
