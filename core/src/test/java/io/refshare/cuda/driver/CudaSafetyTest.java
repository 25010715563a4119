package io.refshare.cuda.driver;

import io.refshare.cuda.CudaConfig;
import io.refshare.cuda.CudaException;
import io.refshare.cuda.CudaUnavailableException;
import io.refshare.tensor.Device;
import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.RefshareConfig;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicReference;

import static io.refshare.cuda.driver.CudaAcrossProcessesTest.consumer;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.exit;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.fill;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.numbers;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.send;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a real driver punishes and the CUDA backend must never do: return a token while the
 * memory is still open, open a stale descriptor's memory, disturb the caller's context, use a
 * stream {@code close} destroyed, start on a device that cannot share. These tests steer the
 * test double (fault injection, settings, held streams), so they need it.
 */
class CudaSafetyTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final Device CUDA = Device.cuda(0);

    private static TestDouble testDouble(TempShm shm, String why) {
        CudaTestSupport.requireDouble(why);
        TestDouble td = CudaTestSupport.testDouble();
        td.configure(shm.path(), 1, -1);
        td.reset();
        return td;
    }

    /**
     * A device block of this very process on another device is refused plainly (its address is
     * valid on its own device only, and refshare enables no peer access), and its token goes
     * back to the sender, so the producer's memory is not pinned by a message nobody can take.
     */
    @Test
    void aSameProcessReceiverOnAnotherDeviceIsRefusedAndTheTokenGoesBack() throws InterruptedException {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "two devices");
            td.configure(shm.path(), 2, -1);
            try (Refshare producer = Refshare.open(shm.config());
                 Refshare other = Refshare.open(shm.config().withCudaDevice(1))) {
                try (Tensor t = producer.allocate(CUDA, DType.UINT8, 4096)) {
                    fill(producer, t, 5);
                    byte[] message = producer.share(t);
                    var e = assertThrows(RefshareException.class, () -> other.receive(message));
                    assertTrue(e.getMessage().contains("cuda:0") && e.getMessage().contains("cuda:1"),
                            e.getMessage());
                    assertThrows(RefshareException.class, () -> producer.receive(message),
                            "the refused message's reference went back to the sender: it is used up");
                }
                assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)), "the reference came back");
            } finally {
                td.reset();
            }
        }
    }

    /** A failed segment release keeps the token: returning it could let the sender free memory still open here. */
    @Test
    void aReceivedDeviceBlockKeepsItsTokenWhenItsReleaseFails() {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "make a release fail");
            try (Refshare rs = Refshare.open(shm.config())) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                fill(rs, t, 3);
                Tensor back = Internals.receive(rs, Internals.shareDescriptor(rs, t));
                assertEquals(1, Internals.sharing(rs).liveCounts());
                td.fail("cuStreamSynchronize", 700, 1);
                var e = assertThrows(CudaException.class, back::close);
                assertEquals("cuStreamSynchronize", e.call());
                assertEquals(1, Internals.sharing(rs).liveCounts(), "the token stays counted while the memory may be open");
                t.close();
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /**
     * As above, with one token a counter file, so that the file is retired when the release
     * fails: the token stays held (and this process in the file), instead of being released
     * as this process leaves a file it no longer counts tokens of.
     */
    @Test
    void aFailedReleaseKeepsItsTokenInARetiredCounterFileToo() {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "make a release fail");
            try (Refshare rs = Refshare.open(shm.config().withSlotsPerCounterFile(1))) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                fill(rs, t, 5);
                Tensor back = Internals.receive(rs, Internals.shareDescriptor(rs, t));
                td.fail("cuStreamSynchronize", 700, 1);
                assertThrows(CudaException.class, back::close);
                assertEquals(1, Internals.sharing(rs).liveCounts(), "the token stays counted while the memory may be open");
                t.close();
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /** Disposing a forwarded block's event fails: the segment is still released, then the token goes back. */
    @Test
    void aFailedEventDestroyStillReleasesTheSegmentBeforeTheToken() {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "make an event destroy fail");
            try (Refshare rs = Refshare.open(shm.config())) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                fill(rs, t, 4);
                Tensor back = Internals.receive(rs, Internals.shareDescriptor(rs, t));
                assertTrue(rs.cancel(rs.share(back)), "forwarded once: back's storage has an event of its own");
                td.fail("cuEventDestroy_v2", 700, 1);
                var e = assertThrows(CudaException.class, back::close);
                assertEquals("cuEventDestroy_v2", e.call());
                assertEquals(0, rs.cuda().stats().openSegments(), "the segment was released all the same");
                assertEquals(0, Internals.sharing(rs).liveCounts(), "and then the token went back");
                t.close();
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td); // close destroyed the event whose destroy failed
        }
    }

    /** Claim, then open: a descriptor whose token is gone never reaches the driver, even when its memory was freed. */
    @Test
    void aStaleDeviceDescriptorIsRefusedWithoutOpeningAnything() throws InterruptedException {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "count IPC opens");
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm c = consumer(shm)) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                fill(rs, t, 5);
                byte[] message = rs.share(t);
                assertTrue(rs.cancel(message));
                t.close();
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                rs.trim(); // the allocation is freed, its event destroyed
                assertEquals(0, td.counter("liveAllocations"));
                String refused = send(c, "REFUSE " + HEX.formatHex(message));
                assertTrue(refused.startsWith("REFUSED message already received or returned"), refused);
                assertArrayEquals(new long[] {0, 0}, numbers(send(c, "DOUBLE cuIpcOpenMemHandle cuIpcOpenEventHandle"),
                        "DOUBLE"), "nothing opened for a stale descriptor");
                exit(c);
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /** Every refshare call leaves the calling thread's current context as it found it. */
    @Test
    void theCallersCurrentContextIsRestored() {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "have a second device");
            td.configure(shm.path(), 2, -1);
            CudaDriver driver = CudaDriver.system();
            MemorySegment mine = driver.primaryContextRetain(1);
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofConfined()) {
                driver.setCurrentContext(mine);
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                assertEquals(mine.address(), driver.currentContext().address(), "after allocate");
                MemorySegment host = arena.allocate(4096);
                Patterns.fill(host, 6);
                rs.cuda().copyFromHost(host, t);
                assertEquals(mine.address(), driver.currentContext().address(), "after copyFromHost");
                Descriptor d = Internals.shareDescriptor(rs, t);
                try (Tensor back = Internals.receive(rs, d)) {
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(back, arena), 6));
                }
                assertEquals(mine.address(), driver.currentContext().address(), "after receive, copy, close");
                driver.setCurrentContext(MemorySegment.NULL);
                t.close();
                rs.trim();
                assertEquals(0, driver.currentContext().address(), "no context stays current on a thread without one");
            } finally {
                driver.setCurrentContext(MemorySegment.NULL);
                driver.primaryContextRelease(1);
                td.configure(shm.path(), 1, -1);
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /** close() waits for a release using the stream: it never destroys the stream under it. */
    @Test
    void closeWaitsForAReleaseInProgress() throws InterruptedException {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "hold the stream");
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofShared()) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                fill(rs, t, 8);
                Tensor back = Internals.receive(rs, Internals.shareDescriptor(rs, t));
                MemorySegment written = arena.allocate(4096);
                td.pause(true);
                AtomicReference<Throwable> failure = new AtomicReference<>();
                Thread closer = null;
                Thread releaser = null;
                try {
                    rs.cuda().copyFromHostAsync(written, t); // the held stream has work: a release's synchronize waits
                    long syncs = td.counter("cuStreamSynchronize");
                    releaser = Thread.ofPlatform().start(() -> run(back::close, failure));
                    while (td.counter("cuStreamSynchronize") == syncs) {
                        Thread.sleep(1);
                    }
                    closer = Thread.ofPlatform().start(() -> run(Internals.cudaSharing(rs)::close, failure));
                    Thread.sleep(300);
                    assertEquals(syncs + 1, td.counter("cuStreamSynchronize"),
                            "close reached the driver while a release was using the stream");
                    assertTrue(closer.isAlive(), "close waits for the release");
                } finally {
                    td.pause(false);
                    if (releaser != null) {
                        releaser.join();
                    }
                    if (closer != null) {
                        closer.join();
                    }
                }
                assertNull(failure.get());
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    private static void run(Runnable action, AtomicReference<Throwable> failure) {
        try {
            action.run();
        } catch (Throwable e) {
            failure.compareAndSet(null, e);
        }
    }

    /** Devices that cannot share memory between processes, and drivers too old, are refused with plain messages. */
    @Test
    void devicesThatCannotShareAreRefusedPlainly() {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "pretend other devices and drivers");
            CudaDriver driver = CudaDriver.system();
            try {
                td.set("computeMode", 3);
                assertRefused(driver, "is in compute mode EXCLUSIVE_PROCESS: only one process may use it at a time");
                td.set("computeMode", 2);
                assertRefused(driver, "is in compute mode PROHIBITED: no process may use it");
                td.reset();
                td.set("unifiedAddressing", 0);
                assertRefused(driver, "does not support CUDA IPC (no unified addressing)");
                td.reset();
                td.set("ipcEvents", 0);
                assertRefused(driver, "does not support CUDA IPC events");
                td.set("driverVersion", 11080); // the attribute is CUDA 12's: an 11.x driver answers "invalid value"
                CudaContext.open(driver, 0).close();
                td.set("driverVersion", 10020);
                String library = CudaTestSupport.library();
                var old = assertThrows(CudaUnavailableException.class, () -> CudaDriver.load(library));
                assertEquals("the CUDA driver " + library + " is too old: it supports CUDA 10.2, refshare needs CUDA 11.0"
                        + " or newer (for cuIpcOpenMemHandle_v2 and cuDevicePrimaryCtxRelease_v2); update the NVIDIA"
                        + " driver", old.getMessage());
            } finally {
                td.reset();
            }
            assertEquals(0, td.counter("livePrimaryContextRetains"), "nothing retained by a refused open");
        }
    }

    private static void assertRefused(CudaDriver driver, String expected) {
        var e = assertThrows(CudaUnavailableException.class, () -> CudaContext.open(driver, 0));
        assertTrue(e.getMessage().startsWith("CUDA device 0 (refshare CUDA test double #0 (not a GPU)) " + expected),
                e.getMessage());
    }

    /**
     * The producer never frees memory a consumer still has open: a consumer's close waits for its
     * stream (held here, with a write into the block queued on it) with the token still counted, so
     * collecting and trimming meanwhile frees nothing; the double records any free under an importer.
     */
    @Test
    void aProducerNeverFreesMemoryAConsumerStillHasOpen() throws InterruptedException {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "hold the consumer's stream");
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm c = consumer(shm)) {
                Tensor t = rs.allocate(CUDA, DType.UINT8, 64 << 10);
                fill(rs, t, 1);
                assertEquals("OK t", send(c, "RECV t 1 " + HEX.formatHex(rs.share(t))));
                assertEquals("HELD", send(c, "HOLD"));
                try {
                    assertEquals("QUEUED t", send(c, "QUEUE t 2")); // stays queued on the held stream
                    t.close();
                    assertEquals("CLOSING t", send(c, "CLOSEASYNC t")); // waits for its stream first
                    Thread.sleep(300);
                    rs.collect();
                    rs.trim();
                    assertEquals(0, td.violations(), td.lastViolation());
                    assertEquals(1, td.counter("liveAllocations"), "still counted: not freed");
                } finally {
                    assertEquals("RESUMED", send(c, "RESUME"));
                }
                assertEquals("CLOSED t", send(c, "JOIN t"));
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                rs.trim();
                assertEquals(0, td.counter("liveAllocations"));
                exit(c);
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /**
     * Older drivers: a second open of the same handle in one process fails (ALREADY_MAPPED) and
     * live interprocess events are capped. refshare opens a segment once per process and keeps
     * events within its own cap, so both sides run unchanged.
     */
    @Test
    void legacyDriverRulesAreKept() throws InterruptedException {
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm, "act as an older driver");
            td.set("legacy", 1);
            td.set("maxIpcEvents", 2);
            RefshareConfig config = shm.config().withCuda(CudaConfig.defaults().withMaxLiveEvents(2));
            try (Refshare rs = Refshare.open(config); ChildJvm c = consumer(shm)) {
                assertEquals("SET", send(c, "SET legacy 1"));
                assertEquals("SET", send(c, "SET maxIpcEvents 1"));
                java.util.List<Tensor> tensors = new java.util.ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    Tensor t = rs.allocate(CUDA, DType.UINT8, 4096);
                    fill(rs, t, 20 + i);
                    tensors.add(t);
                    assertEquals("OK t" + i, send(c, "RECV t" + i + " " + (20 + i) + " " + HEX.formatHex(rs.share(t))));
                }
                assertEquals(1, numbers(send(c, "CUDA"), "CUDA")[1], "one IPC open for the four blocks");
                assertEquals(2, rs.cuda().stats().syncSends(), "sends over the cap synchronized instead");
                tensors.forEach(Tensor::close);
                for (int i = 0; i < 4; i++) {
                    assertEquals("CLOSED t" + i, send(c, "CLOSE t" + i));
                }
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
                exit(c);
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    /** Device memory is not host memory: its address is not readable from the host (with the double, not mapped). */
    @Test
    void deviceAddressesAreNotHostAddresses() {
        try (TempShm shm = new TempShm()) {
            testDouble(shm, "know where its device memory lives");
            try (Refshare rs = Refshare.open(shm.config()); Tensor t = rs.allocate(CUDA, DType.UINT8, 4096)) {
                long address = Internals.storage(t).deviceAddress();
                assertFalse(shm.files().isEmpty());
                assertTrue(address >= 0x200000000000L, "a device address far from host mappings: 0x"
                        + Long.toHexString(address));
            }
        }
    }
}
