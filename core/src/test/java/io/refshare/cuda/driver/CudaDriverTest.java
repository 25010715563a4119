package io.refshare.cuda.driver;

import io.refshare.cuda.CudaException;
import io.refshare.cuda.CudaUnavailableException;
import io.refshare.Internals;
import io.refshare.tensor.Device;
import io.refshare.exceptions.OutOfSharedMemoryException;
import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The FFM bindings in one process, against the test double or a real driver (see
 * {@link CudaTestSupport}): struct passing, handles, copies at offsets, errors, and what a
 * process without a driver or a device sees.
 */
class CudaDriverTest {
    private static final long MIB = 1 << 20;

    @Test
    void aMissingDriverIsAPlainErrorAndHostMemoryIsUnaffected() {
        var e = assertThrows(CudaUnavailableException.class, () -> CudaDriver.load("/nonexistent/libcuda.so.1"));
        assertTrue(e.getMessage().startsWith("no CUDA driver: cannot load /nonexistent/libcuda.so.1"), e.getMessage());
        assertTrue(e.getMessage().contains(CudaDriver.LIBRARY_ENV), e.getMessage());
    }

    /** The double keeps its files in the test's directory, so that a leak fails the test; null for a real driver. */
    private static TestDouble useShm(TempShm shm) {
        if (!CudaTestSupport.isDouble()) {
            return null;
        }
        TestDouble td = CudaTestSupport.testDouble();
        td.configure(shm.path(), -1, -1);
        return td;
    }

    @Test
    void driverCallsGoThroughFfmWithHandlesByValue() {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            useShm(shm);
            driverCalls();
        }
    }

    private static void driverCalls() {
        CudaDriver driver = CudaDriver.system();
        assertTrue(driver.driverVersion() > 0);
        try (CudaContext context = CudaContext.open(driver, 0)) {
            CudaDriver d = context.bind();
            long base = d.memAlloc(2 * MIB);
            try {
                assertEquals(new CudaDriver.AddressRange(base, 2 * MIB), d.addressRange(base + 12345),
                        "an address inside the allocation names the whole allocation");
                byte[] handle = d.ipcGetMemHandle(base);
                assertEquals(64, handle.length);
                assertNotEquals(0, java.util.Arrays.hashCode(handle));

                MemorySegment stream = d.streamCreate(CudaDriver.CU_STREAM_NON_BLOCKING);
                try (Arena arena = Arena.ofConfined()) {
                    // bytes at an offset come back at that offset, and only there
                    MemorySegment in = arena.allocate(100_000);
                    Patterns.fill(in, 7);
                    MemorySegment zeros = arena.allocate(2 * MIB);
                    d.memcpyHtoDAsync(base, zeros, zeros.byteSize(), stream);
                    d.memcpyHtoDAsync(base + 4096, in, in.byteSize(), stream);
                    MemorySegment out = arena.allocate(2 * MIB);
                    d.memcpyDtoHAsync(out, base, out.byteSize(), stream);
                    d.streamSynchronize(stream);
                    assertEquals(-1, Patterns.firstMismatch(out.asSlice(4096, in.byteSize()), 7));
                    assertEquals(0, out.get(ValueLayout.JAVA_BYTE, 4095));
                    assertEquals(0, out.get(ValueLayout.JAVA_BYTE, 4096 + in.byteSize()));

                    MemorySegment event = d.eventCreate(CudaDriver.CU_EVENT_INTERPROCESS
                            | CudaDriver.CU_EVENT_DISABLE_TIMING);
                    d.eventRecord(event, stream);
                    byte[] eventHandle = d.ipcGetEventHandle(event);
                    assertEquals(64, eventHandle.length);
                    d.streamSynchronize(stream);
                    assertTrue(d.eventQuery(event), "the work recorded in the event has run");
                    d.eventDestroy(event);
                } finally {
                    d.streamDestroy(stream);
                }
            } finally {
                d.memFree(base);
            }
        }
    }

    @Test
    void everyErrorNamesTheCallAndTheError() {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            useShm(shm);
            errors();
        }
    }

    private static void errors() {
        CudaDriver driver = CudaDriver.system();
        assertEquals("CUDA_ERROR_NO_DEVICE", driver.errorName(100));
        assertEquals("CUDA_ERROR_INVALID_VALUE", driver.errorName(1));
        assertEquals("CUDA_ERROR_987654", driver.errorName(987_654), "an unknown code still gets a name");
        try (CudaContext context = CudaContext.open(driver, 0)) {
            CudaDriver d = context.bind();
            var e = assertThrows(CudaException.class, () -> d.memFree(0x1000));
            assertEquals("cuMemFree_v2(0x1000)", e.call());
            assertTrue(e.errorName().startsWith("CUDA_ERROR_"), e.errorName());
            assertEquals(e.call() + " failed: " + e.errorName() + " (" + driver.errorString(e.code()) + ")",
                    e.getMessage());
            if (CudaTestSupport.isDouble()) {
                assertEquals("cuMemFree_v2(0x1000) failed: CUDA_ERROR_INVALID_VALUE (invalid argument)",
                        e.getMessage());
                long base = d.memAlloc(2 * MIB);
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment page = arena.allocate(4096);
                    var outside = assertThrows(CudaException.class,
                            () -> d.memcpyDtoHAsync(page, base + 2 * MIB - 100, 4096, MemorySegment.NULL));
                    assertEquals("cuMemcpyDtoHAsync_v2(0x" + Long.toHexString(base + 2 * MIB - 100)
                            + ", 4096 bytes) failed: CUDA_ERROR_INVALID_VALUE (invalid argument)",
                            outside.getMessage());
                    // opening one's own export is refused by the driver: refshare never does it
                    var own = assertThrows(CudaException.class, () -> d.ipcOpenMemHandle(d.ipcGetMemHandle(base)));
                    assertEquals("CUDA_ERROR_INVALID_CONTEXT", own.errorName());
                } finally {
                    d.memFree(base);
                }
            }
        }
    }

    @Test
    void aDeviceThatIsNotThereIsAPlainError() {
        CudaTestSupport.require();
        CudaDriver driver = CudaDriver.system();
        int count = driver.deviceCount();
        var e = assertThrows(CudaUnavailableException.class, () -> CudaContext.open(driver, count));
        assertTrue(e.getMessage().startsWith("no CUDA device " + count + ": this machine has " + count),
                e.getMessage());
    }

    /** A process whose driver has no device: device use fails plainly, host use is unaffected. */
    @Test
    void noDeviceIsAPlainErrorAndHostMemoryStillWorks() {
        CudaTestSupport.requireDouble("pretend there is no device");
        try (TempShm shm = new TempShm();
             ChildJvm child = ChildJvm.start(CudaChildMain.class, "NoDeviceMain", shm.path().toString(), CudaTestSupport.library())) {
            assertEquals("HOST OK", child.read());
            String device = child.read();
            assertTrue(device.startsWith("DEVICE CudaUnavailableException no CUDA device: cuInit(0) returned"
                    + " CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"), device);
            assertEquals("HOST STILL OK", child.read());
            assertEquals(0, child.waitFor());
        }
    }

    /** A block shared by a process and received by that same process uses its memory and event directly. */
    @Test
    void aProcessNeverIpcOpensItsOwnMemory() {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = useShm(shm);
            long opensBefore = td == null ? 0 : td.counter("cuIpcOpenMemHandle") + td.counter("cuIpcOpenEventHandle");
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofConfined()) {
                Tensor t = rs.allocate(Device.cuda(0), DType.INT32, 1000);
                MemorySegment host = arena.allocate(4000);
                Patterns.fill(host, 11);
                rs.cuda().copyFromHost(host, t);
                Descriptor d = Internals.shareDescriptor(rs, t);
                assertEquals(Backend.CUDA, d.backend());
                assertTrue(d.hasEvent());
                try (Tensor back = Internals.receive(rs, d)) {
                    assertEquals(Internals.storage(t).deviceAddress(), Internals.storage(back).deviceAddress(), "the same memory");
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(back, arena), 11));
                    assertEquals(1, rs.cuda().stats().openSegments());
                    assertEquals(0, rs.cuda().stats().ipcOpens());
                    assertEquals(1, rs.cuda().stats().eventWaits());
                }
                t.close();
                assertEquals(0, rs.stats().limboBlocks());
                assertEquals(0, rs.cuda().stats().liveEvents(), "freed with its block");
                assertEquals(0, rs.cuda().stats().openSegments());
                try (Tensor device = rs.allocate(Device.cuda(0), DType.UINT8, 8)) {
                    var data = assertThrows(UnsupportedOperationException.class, device::data);
                    assertTrue(data.getMessage().contains("device memory"), data.getMessage());
                }
            }
            if (td != null) {
                assertEquals(opensBefore, td.counter("cuIpcOpenMemHandle") + td.counter("cuIpcOpenEventHandle"));
                assertNoDeviceObjectsLeft(td);
            }
        }
    }

    /**
     * A batch with device memory in it goes through a queue tensor by tensor, in order, each
     * device message with its own event; a batch refused half-way counts nothing.
     */
    @Test
    void aBatchMixingHostAndDeviceTensorsGoesThroughAQueue() throws InterruptedException {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = useShm(shm);
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofConfined();
                 ShareQueue out = rs.createQueue(8); ShareQueue in = rs.openQueue(out.name())) {
                Tensor first = rs.allocate(DType.INT32, 100);
                Tensor device = rs.allocate(Device.cuda(0), DType.INT32, 1000);
                Tensor last = rs.allocate(DType.INT32, 100);
                Patterns.fill(first.data(), 1);
                Patterns.fill(last.data(), 3);
                MemorySegment host = arena.allocate(4000);
                Patterns.fill(host, 2);
                rs.cuda().copyFromHost(host, device);
                Tensor closed = rs.allocate(Device.cuda(0), DType.INT32, 10);
                closed.close();
                assertThrows(IllegalStateException.class, () -> out.putAll(List.of(first, device, closed)));
                assertEquals(0, out.size(), "a refused batch queues nothing");
                assertEquals(0, rs.liveCounts(), "a refused batch counts nothing");

                out.putAll(List.of(first, device, last));
                assertEquals(3, rs.liveCounts(), "one reference per message");
                List.of(first, device, last).forEach(Tensor::close);
                try (Tensor a = in.take(); Tensor b = in.take(); Tensor c = in.take()) {
                    assertEquals(-1, Patterns.firstMismatch(a.data(), 1), "the first, from host memory");
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(b, arena), 2), "the second, from the device");
                    assertEquals(-1, Patterns.firstMismatch(c.data(), 3), "the last, from host memory");
                }
                assertEquals(0, rs.liveCounts());
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "every block came back");
                assertEquals(0, rs.cuda().stats().liveEvents(), "the device message's event freed with its block");
            }
            if (td != null) {
                assertNoDeviceObjectsLeft(td);
            }
        }
    }

    /** A batch whose device tensor cannot be shared (its event fails) gives back what the tensors before it counted. */
    @Test
    void aBatchWhoseDeviceTensorFailsCountsNothing() throws InterruptedException {
        CudaTestSupport.requireDouble("fail the device message's event");
        TestDouble td = CudaTestSupport.testDouble();
        try (TempShm shm = new TempShm()) {
            td.configure(shm.path(), -1, -1);
            try (Refshare rs = Refshare.open(shm.config()); ShareQueue out = rs.createQueue(8)) {
                Tensor host = rs.allocate(DType.INT32, 100);
                Tensor device = rs.allocate(Device.cuda(0), DType.INT32, 1000);
                td.fail("cuEventRecord", 700, 1);
                assertThrows(CudaException.class, () -> out.putAll(List.of(host, host, device)));
                assertEquals(0, out.size(), "nothing queued");
                assertEquals(0, rs.liveCounts(), "the host tensor's two references were given back");
                host.close();
                device.close();
                assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
            } finally {
                td.reset();
            }
            assertNoDeviceObjectsLeft(td);
        }
    }

    @Test
    void exhaustedDeviceMemoryIsOutOfSharedMemory() {
        CudaTestSupport.requireDouble("limit device memory");
        TestDouble td = CudaTestSupport.testDouble();
        try (TempShm shm = new TempShm()) {
            td.configure(shm.path(), -1, 6 * MIB);
            try (Refshare rs = Refshare.open(shm.config())) {
                Tensor big = rs.allocate(Device.cuda(0), DType.UINT8, 3 * MIB); // a 4 MiB segment
                var e = assertThrows(OutOfSharedMemoryException.class,
                        () -> rs.allocate(Device.cuda(0), DType.UINT8, 3 * MIB));
                assertTrue(e.getMessage().startsWith("no device memory left on cuda:0"), e.getMessage());
                assertTrue(e.getMessage().contains("cuMemAlloc_v2(4194304 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY"),
                        e.getMessage());
                big.close();
                rs.allocate(Device.cuda(0), DType.UINT8, 3 * MIB).close(); // the cached segment serves it
                assertEquals(1, rs.cuda().stats().allocator().segmentCreations());
            } finally {
                td.configure(shm.path(), -1, -1);
            }
            assertNoDeviceObjectsLeft(td);
        }
    }

    static void assertNoDeviceObjectsLeft(TestDouble td) {
        for (String live : List.of("liveAllocations", "liveMappings", "liveEvents", "liveStreams",
                "livePrimaryContextRetains")) {
            assertEquals(0, td.counter(live), live + " in the test double after close");
        }
        assertFalse(td.pending() > 0, "no stream work left");
        assertEquals(0, td.violations(), () -> "the test double recorded a misuse: " + td.lastViolation());
    }
}
