package io.refshare.cuda.driver;

import io.refshare.stats.CudaStats;
import io.refshare.Internals;
import io.refshare.tensor.Device;
import io.refshare.Refshare;
import io.refshare.SharedHolder;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;

import static io.refshare.cuda.driver.CudaAcrossProcessesTest.consumer;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.exit;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.fill;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.numbers;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.send;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.testDouble;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A {@link SharedHolder} of device tensors: this JVM publishes, readers are child JVMs
 * ({@link CudaPeerMain}) that acquire the current version as a device tensor through its IPC
 * handle. Runs against the test double, or a real driver (see {@link CudaTestSupport}).
 */
class CudaHolderAcrossProcessesTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final Device CUDA = Device.cuda(0);
    private static final long VERSION_BYTES = 64 << 10;

    /** A new device version written with {@code seed}'s pattern, published; the publisher's own tensor is closed. */
    private static void publish(Refshare rs, SharedHolder holder, long seed) {
        try (Tensor t = rs.allocate(CUDA, DType.UINT8, VERSION_BYTES)) {
            fill(rs, t, seed);
            holder.publish(t);
        }
    }

    /** The reader's {@code CUDA} answer: open segments, IPC opens, IPC closes, event waits. */
    private static long[] cuda(ChildJvm reader) {
        return numbers(send(reader, "CUDA"), "CUDA");
    }

    @Test
    void readersInOtherProcessesAcquireDeviceVersionsAndEachOldOneIsFreedOnce() throws InterruptedException {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm a = consumer(shm); ChildJvm b = consumer(shm)) {
                SharedHolder holder = rs.createHolder(4, 4);
                try {
                    for (ChildJvm c : List.of(a, b)) {
                        assertEquals("HOPENED", send(c, "HOPEN " + holder.name()));
                    }
                    publish(rs, holder, 1001);
                    assertEquals("OK a1", send(a, "HGET a1 1001"));
                    assertEquals("OK b1", send(b, "HGET b1 1001"));
                    publish(rs, holder, 1002); // both still hold version 1
                    assertEquals("OK a2", send(a, "HGET a2 1002"));
                    publish(rs, holder, 1003);
                    assertEquals("OK b3", send(b, "HGET b3 1003"));

                    SharedHolder.Stats s = holder.stats();
                    assertEquals(3, s.published());
                    assertEquals(0, s.retired(), "every old version is still held by a reader");
                    assertEquals(3, s.liveVersions());
                    assertEquals(3, rs.stats().limboBlocks(), "the publisher's dropped versions wait in its limbo");
                    assertEquals(3, Internals.sharing(rs).liveCounts(), "one token per version, none per acquisition");
                    // zero-copy: the three versions are blocks of one segment of the publisher, which each reader
                    // IPC-opened once and waited on the publish's event for each acquisition
                    assertArrayEquals(new long[] {1, 1, 0, 2}, cuda(a));
                    assertArrayEquals(new long[] {1, 1, 0, 2}, cuda(b));

                    // the publisher writes new memory meanwhile: the held versions are not handed out again
                    try (Tensor scratch = rs.allocate(CUDA, DType.UINT8, 3 * VERSION_BYTES)) {
                        fill(rs, scratch, -1);
                    }
                    assertEquals("OK a1", send(a, "VERIFY a1 1001"));
                    assertEquals("OK a2", send(a, "VERIFY a2 1002"));
                    assertEquals("OK b1", send(b, "VERIFY b1 1001"));

                    // an acquired device version forwarded back to its publisher: its own memory, no IPC open
                    String forwarded = send(a, "FORWARD a1").substring("FORWARDED ".length());
                    try (Tensor back = rs.receive(HEX.parseHex(forwarded)); Arena arena = Arena.ofConfined()) {
                        assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(back, arena), 1001));
                    }
                    assertEquals(0, rs.cuda().stats().ipcOpens());

                    assertEquals("CLOSED a1", send(a, "CLOSE a1"));
                    assertEquals(0, holder.stats().retired(), "b still holds version 1");
                    assertEquals("CLOSED b1", send(b, "CLOSE b1"));
                    assertEquals(1, holder.stats().retired(), "the last reader of version 1 let go");
                    Eventually.await(() -> rs.stats().collected() == 1 && rs.stats().limboBlocks() == 2,
                            "version 1's block leaves the limbo");
                    assertEquals("CLOSED a2", send(a, "CLOSE a2"));
                    assertEquals(2, holder.stats().retired());
                    Eventually.await(() -> rs.stats().collected() == 2 && rs.stats().limboBlocks() == 1,
                            "version 2's block leaves the limbo");
                    assertArrayEquals(new long[] {0, 1, 1, 2}, cuda(a), "a closed the segment with its last block");
                    assertArrayEquals(new long[] {1, 1, 0, 2}, cuda(b), "b still holds version 3");
                    assertEquals("CLOSED b3", send(b, "CLOSE b3"));
                    assertEquals(2, holder.stats().retired(), "version 3 is current");
                    assertArrayEquals(new long[] {0, 1, 1, 2}, cuda(b));

                    long retiredByReaders = 0;
                    for (ChildJvm c : List.of(a, b)) {
                        long[] closed = numbers(send(c, "HCLOSE"), "HCLOSED");
                        assertEquals(0, closed[1], "anomalies: a version's token returned twice");
                        retiredByReaders += closed[0];
                    }
                    assertEquals(2, retiredByReaders, "versions 1 and 2 were retired by their last readers");
                    holder.close();
                    s = holder.stats();
                    assertEquals(3, s.retired());
                    assertEquals(1, s.retiredHere(), "the creator's close retired version 3");
                    assertEquals(0, s.anomalies());
                    assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                    assertEquals(3, rs.stats().collected(), "each version's block freed exactly once");
                    CudaStats device = rs.cuda().stats();
                    assertEquals(0, Internals.sharing(rs).liveCounts());
                    assertEquals(0, device.allocator().blocksInUse());
                    assertEquals(0, device.liveEvents(), "each version's event went with its block");
                    assertEquals(3, device.eventsCreated());
                    assertEquals(3, device.eventsDestroyed());
                    exit(a);
                    exit(b);
                } finally {
                    holder.close();
                }
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
        } // TempShm: no holder, counter, segment or double file is left
    }

    /** A reader's acquire returns once the publisher's work queued before the publish is done. */
    @Test
    void aReaderWaitsForThePublishersEvent() throws InterruptedException {
        CudaTestSupport.requireDouble("hold the publisher's stream");
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm c = consumer(shm);
                 Arena arena = Arena.ofShared()) {
                SharedHolder holder = rs.createHolder();
                try {
                    assertEquals("HOPENED", send(c, "HOPEN " + holder.name()));
                    Tensor t = rs.allocate(CUDA, DType.UINT8, VERSION_BYTES);
                    fill(rs, t, 7); // what a reader reading too early would see
                    MemorySegment written = arena.allocate(VERSION_BYTES);
                    Patterns.fill(written, 42);
                    String waiting;
                    td.pause(true);
                    try {
                        rs.cuda().copyFromHostAsync(written, t); // queued behind the pause: the device still holds 7
                        holder.publish(t);                       // records the event after the copy
                        assertTrue(td.pending() >= 2, "the copy and the record wait on the held stream");
                        waiting = send(c, "HTAKE v");
                    } finally {
                        td.pause(false);
                    }
                    assertTrue(numbers(waiting, "WAITING v")[0] >= 1,
                            "the acquire polled the publisher's unfinished event: " + waiting);
                    assertEquals("TAKEN v", send(c, "JOINTAKE v"));
                    assertEquals("OK v", send(c, "VERIFY v 42"), "the reader read after the publisher's copy");
                    assertEquals(0, numbers(send(c, "DOUBLE blockedWaits"), "DOUBLE")[0],
                            "the reader's stream never waited for the publisher's event");
                    t.close();
                    assertEquals("CLOSED v", send(c, "CLOSE v"));
                    assertEquals(0, numbers(send(c, "HCLOSE"), "HCLOSED")[1]);
                    holder.close();
                    assertEquals(1, holder.stats().retired());
                    assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                    exit(c);
                } finally {
                    holder.close();
                }
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }
}
