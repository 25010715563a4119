package io.refshare.cuda.driver;

import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.channel.ShmQueue;
import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.cuda.CudaException;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.ResourceLimitException;
import io.refshare.shm.ProcessIdentity;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;

import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static io.refshare.cuda.driver.CudaAcrossProcessesTest.consumer;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.exit;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.send;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.testDouble;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A consumer's take of a device tensor that cannot finish for a reason of its own, not the
 * message's, gives the message back: its device has no memory left to open the producer's
 * segment ({@code cuIpcOpenMemHandle} answers {@code CUDA_ERROR_OUT_OF_MEMORY}), or its thread
 * is interrupted while the receive waits for the device work the producer recorded. The claim
 * that comes before a device open is undone (protocol 8.4, unclaim), the queue gives the
 * message back, and the next take receives it intact. The producer is a child JVM
 * ({@link CudaPeerMain}); the message reaches the queue through a raw handle, as the child's
 * sender made it. Only the test double can make the open fail, and the producer's work wait,
 * on demand.
 */
class CudaTakeGivesBackTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final long SEED = 41;

    /** This JVM's consumer side, its producer child, and a raw handle of the queue to offer the child's messages on. */
    private record Scene(TempShm shm, TestDouble td, Refshare rs, ChildJvm producer, ShareQueue q, ShmQueue raw) {
        /**
         * The message of a device tensor the producer makes and sends, offered on the queue;
         * {@code holdFirst}: the producer holds its streams before the send, so the device work
         * the send records cannot be done.
         */
        Descriptor offer(boolean holdFirst) {
            assertEquals("MADE t", send(producer, "MAKE t " + SEED + " " + (64 << 10) + " cuda"));
            if (holdFirst) {
                assertEquals("HELD", send(producer, "HOLD"));
            }
            byte[] message = HEX.parseHex(send(producer, "FORWARD t").substring("FORWARDED ".length()));
            assertTrue(raw.offer(message));
            return DescriptorCodec.decode(message);
        }

        /** The message was not used up: its producer's reference is out, in flight, held by nobody. */
        void assertInFlight(Descriptor d) {
            assertEquals("LIVE 1", send(producer, "LIVE"), "the producer's reference is still out");
            try (CounterFile counters = CounterFile.open(shm.directory(), d.counterFileName())) {
                assertEquals(CounterFileLayout.IN_FLIGHT, counters.state(d.slot()), "in flight again, not used up");
                assertEquals(0, counters.heldBy(ProcessIdentity.current()));
            }
        }

        /** The next take receives the message intact, and its close gives the reference back once. */
        void takeAgainAndRelease() throws InterruptedException {
            try (Tensor t = q.poll(30, TimeUnit.SECONDS)) { // a bound against hanging, not a timing check
                assertTrue(t != null, "the message was given back to the queue");
                assertEquals("OK t", CudaPeerMain.verify(rs, "t", t, SEED), "received intact");
            }
            assertEquals(0, q.rejected());
            assertEquals(1, rs.stats().received());
            assertEquals("CLOSED t", send(producer, "CLOSE t"));
            assertEquals("LIVE 0", send(producer, "LIVE"), "released once, by the take that succeeded");
        }
    }

    private interface Play {
        void on(Scene scene) throws Exception;
    }

    /** Runs {@code play} in a fresh scene, then checks that the producer exits cleanly and no device object is left. */
    private static void inAScene(String whyTheDouble, Play play) throws Exception {
        CudaTestSupport.requireDouble(whyTheDouble);
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm producer = consumer(shm);
                 ShareQueue q = rs.createQueue(4); ShmQueue raw = ShmQueue.open(shm.directory(), q.name())) {
                play.on(new Scene(shm, td, rs, producer, q, raw));
                exit(producer);
            } finally {
                td.reset();
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
        }
    }

    @Test
    void aConsumerOutOfDeviceMemoryGivesTheMessageBackAndTakesItLater() throws Exception {
        inAScene("make cuIpcOpenMemHandle run out of device memory on demand", s -> {
            Descriptor d = s.offer(false);
            s.td().fail("cuIpcOpenMemHandle_v2", CudaDriver.CUDA_ERROR_OUT_OF_MEMORY, 1);
            // a bound against hanging, not a timing check: a message the failure used up leaves nothing to take
            var e = assertThrows(ResourceLimitException.class, () -> s.q().poll(30, TimeUnit.SECONDS));
            assertTrue(e.getMessage().startsWith("no device memory left on "), e.getMessage());
            assertTrue(e.getMessage().contains(d.segmentName()), e.getMessage());
            assertTrue(e.getCause() instanceof CudaException c && c.code() == CudaDriver.CUDA_ERROR_OUT_OF_MEMORY,
                    String.valueOf(e.getCause()));
            assertEquals(0, s.q().rejected(), "not a rejection");
            assertEquals(0, s.rs().stats().received());
            assertEquals(0, s.rs().cuda().stats().openSegments());
            s.assertInFlight(d);
            s.takeAgainAndRelease();
        });
    }

    /**
     * A take interrupted while it waits for the producer's device work (the producer's streams
     * held) throws {@link InterruptedException}, as any interrupted wait of a take does, with the
     * interrupt status cleared; the message goes back, and once the work is done it is taken.
     */
    @Test
    void aTakeInterruptedWhileItWaitsForTheProducersWorkGivesTheMessageBack() throws Exception {
        inAScene("hold the producer's device work and let it go again", s -> {
            Descriptor d = s.offer(true);
            assertTrue(d.hasEvent(), "the send recorded an event behind the hold");
            AtomicReference<Throwable> failure = new AtomicReference<>();
            long pollsBefore = s.td().counter("eventNotReady"); // the double's counts outlive a test
            Thread taker = Thread.ofPlatform().daemon().start(() -> {
                try {
                    s.q().take().close();
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            Eventually.await(() -> s.td().counter("eventNotReady") > pollsBefore, "the take polls the held event");
            taker.interrupt();
            taker.join(60_000); // a bound against hanging, not a timing check
            assertFalse(taker.isAlive(), "the interrupt ended the wait");
            assertTrue(failure.get() instanceof InterruptedException, String.valueOf(failure.get()));
            assertTrue(failure.get().getCause() instanceof ReceiveInterruptedException,
                    String.valueOf(failure.get().getCause()));
            assertEquals(0, s.q().rejected(), "not a rejection");
            assertEquals(0, s.rs().cuda().stats().openSegments());
            s.assertInFlight(d);
            assertEquals("RESUMED", send(s.producer(), "RESUME"));
            s.takeAgainAndRelease();
        });
    }
}
