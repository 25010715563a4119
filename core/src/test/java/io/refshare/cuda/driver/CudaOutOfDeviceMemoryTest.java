package io.refshare.cuda.driver;

import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.cuda.CudaException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.shm.ProcessIdentity;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;

import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

import static io.refshare.cuda.driver.CudaAcrossProcessesTest.consumer;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.exit;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.send;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.testDouble;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A consumer whose device has no memory left to open a producer's segment
 * ({@code cuIpcOpenMemHandle} answers {@code CUDA_ERROR_OUT_OF_MEMORY}) has reached a limit of
 * its own, which says nothing about the message: the take fails with a
 * {@link ResourceLimitException}, the message's token is in flight again (the claim that
 * comes before a device open is given back, protocol 8.4), and the queue gives the message
 * back, so the next take receives it intact. The producer is a child JVM ({@link CudaPeerMain});
 * the message reaches the queue through a raw handle, as the child's sender made it. Only the
 * test double can make the open fail on demand.
 */
class CudaOutOfDeviceMemoryTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final long SEED = 41;

    @Test
    void aConsumerOutOfDeviceMemoryGivesTheMessageBackAndTakesItLater() throws InterruptedException {
        CudaTestSupport.requireDouble("make cuIpcOpenMemHandle run out of device memory on demand");
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm producer = consumer(shm);
                 ShareQueue q = rs.createQueue(4); ShmQueue raw = ShmQueue.open(shm.directory(), q.name())) {
                assertEquals("MADE t", send(producer, "MAKE t " + SEED + " " + (64 << 10) + " cuda"));
                byte[] message = HEX.parseHex(send(producer, "FORWARD t").substring("FORWARDED ".length()));
                Descriptor d = DescriptorCodec.decode(message);
                assertTrue(raw.offer(message));

                td.fail("cuIpcOpenMemHandle_v2", CudaDriver.CUDA_ERROR_OUT_OF_MEMORY, 1);
                // a bound against hanging, not a timing check: a message used up by the failure would leave nothing to take
                var e = assertThrows(ResourceLimitException.class, () -> q.poll(30, TimeUnit.SECONDS));
                assertTrue(e.getMessage().startsWith("no device memory left on "), e.getMessage());
                assertTrue(e.getMessage().contains(d.segmentName()), e.getMessage());
                assertTrue(e.getCause() instanceof CudaException c && c.code() == CudaDriver.CUDA_ERROR_OUT_OF_MEMORY,
                        String.valueOf(e.getCause()));
                assertEquals(0, q.rejected(), "not a rejection");
                assertEquals(0, rs.stats().received());
                assertEquals(0, rs.cuda().stats().openSegments());
                assertEquals("LIVE 1", send(producer, "LIVE"), "the producer's reference is still out");
                try (CounterFile counters = CounterFile.open(shm.directory(), d.counterFileName())) {
                    assertEquals(CounterFileLayout.IN_FLIGHT, counters.state(d.slot()), "in flight again, not used up");
                    assertEquals(0, counters.heldBy(ProcessIdentity.current()));
                }

                try (Tensor t = q.poll(30, TimeUnit.SECONDS)) { // a bound against hanging, not a timing check
                    assertTrue(t != null, "the message was given back to the queue");
                    assertEquals("OK t", CudaPeerMain.verify(rs, "t", t, SEED), "received intact");
                }
                assertEquals(0, q.rejected());
                assertEquals(1, rs.stats().received());
                assertEquals("CLOSED t", send(producer, "CLOSE t"));
                assertEquals("LIVE 0", send(producer, "LIVE"), "released once, by the take that succeeded");
                exit(producer);
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }
}
