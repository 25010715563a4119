package io.refshare.cuda.driver;

import io.refshare.Refshare;
import io.refshare.Tensor;
import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.exceptions.ReceiveInterruptedException;
import io.refshare.exceptions.RefshareException;
import io.refshare.inspect.Janitor;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.Verdict;
import io.refshare.stats.CudaStats;
import io.refshare.tensor.DType;
import io.refshare.tensor.Device;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;

import static io.refshare.cuda.driver.CudaAcrossProcessesTest.consumer;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.exit;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.send;
import static io.refshare.cuda.driver.CudaAcrossProcessesTest.testDouble;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A device tensor whose sender died before it was received: device memory and events do not
 * outlive their process, so the receive is refused before the driver opens anything, and the
 * token goes back as after the other refusals that follow the claim. A sender that dies while
 * the receive waits for its device work is refused too, and a receive waiting for work that
 * never finishes ends when this process closes its refshare. The sender is a child JVM
 * ({@link CudaPeerMain}) killed with SIGKILL; this JVM receives. Only a DEAD verdict refuses:
 * a live sender, and one not known to be dead, are received as before.
 *
 * <p>This JVM holds a host tensor of the sender across its death: the held token keeps the
 * sender's counter file from a sweep (every {@code Refshare.open} starts one), which would
 * otherwise race the device receive and could refuse it earlier, for the file being gone.
 */
class CudaDeadSenderTest {
    private static final HexFormat HEX = HexFormat.of();
    private static final long BYTES = 64 << 10;
    private static final long HOST_SEED = 30;
    private static final long DEVICE_SEED = 31;
    /** Each task on a thread of its own: the common pool may have one worker, which a waiting receive takes. */
    private static final Executor OWN_THREAD = task -> Thread.ofPlatform().daemon().start(task);

    /** A tensor of {@code device} made and shared by {@code producer}: the message's bytes. */
    private static byte[] shareFrom(ChildJvm producer, String id, long seed, String device) {
        assertEquals("MADE " + id, send(producer, "MAKE " + id + " " + seed + " " + BYTES + " " + device));
        return HEX.parseHex(send(producer, "FORWARD " + id).substring("FORWARDED ".length()));
    }

    /** What a killed sender left this process: a host tensor it shared (held here) and a device tensor's message. */
    private record FromTheDead(Tensor host, byte[] message) {
    }

    /**
     * A child shares a host tensor (received here, and held) and a device tensor (its message kept),
     * then is killed once its device work is done (it read the tensor back, which waits for its
     * stream): a record left pending by a killed process never completes, and a receive from a
     * sender that is not known to be dead waits for it (tests of work left pending kill the sender
     * on purpose, with its streams held).
     */
    private static FromTheDead shareThenDie(Refshare rs, TempShm shm) {
        try (ChildJvm producer = consumer(shm)) {
            Tensor host = rs.receive(shareFrom(producer, "h", HOST_SEED, "host"));
            byte[] message = shareFrom(producer, "t", DEVICE_SEED, "cuda");
            assertEquals("OK t", send(producer, "VERIFY t " + DEVICE_SEED), "the sender's work is done");
            producer.kill();
            return new FromTheDead(host, message);
        }
    }

    @Test
    void aDeviceTensorOfAKilledSenderIsRefusedWithoutOpeningAnything() throws IOException {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            ShmDirectory dir = shm.directory();
            ProcessIdentity sender;
            try (Refshare rs = Refshare.open(shm.config())) {
                FromTheDead dead = shareThenDie(rs, shm);
                byte[] message = dead.message();
                Tensor host = dead.host();
                Descriptor d = DescriptorCodec.decode(message);
                sender = d.sender();
                Eventually.await(() -> dir.verdict(sender) == Verdict.DEAD, "the killed sender's life lock is dropped");
                long memOpens = td == null ? 0 : td.counter("cuIpcOpenMemHandle");
                long eventOpens = td == null ? 0 : td.counter("cuIpcOpenEventHandle");
                try (host) {
                    assertEquals(-1, Patterns.firstMismatch(host.data(), HOST_SEED), "host memory outlives its sender");

                    var e = assertThrows(RefshareException.class, () -> rs.receive(message));
                    assertTrue(e.getMessage().contains("its sender, " + sender + ", is dead"), e.getMessage());
                    assertTrue(d.hasEvent(), "the refused message carried an event: it was not opened either");
                    CudaStats s = rs.cuda().stats();
                    assertEquals(0, s.ipcOpens(), "no IPC open");
                    assertEquals(0, s.openSegments());
                    assertEquals(0, s.eventWaits(), "no wait for the dead sender's event");
                    if (td != null) {
                        assertEquals(memOpens, td.counter("cuIpcOpenMemHandle"), "the driver opened no memory handle");
                        assertEquals(eventOpens, td.counter("cuIpcOpenEventHandle"), "nor an event handle");
                    }
                    assertEquals(1, rs.stats().received(), "the host tensor only");
                    // claimed, then given back, as the other refusals after the claim do: released, held by nobody
                    try (CounterFile counters = CounterFile.open(dir, d.counterFileName())) {
                        assertEquals(CounterFileLayout.RELEASED, counters.state(d.slot()));
                        assertEquals(1, counters.heldBy(ProcessIdentity.current()), "only the host tensor's token");
                    }
                    var again = assertThrows(RefshareException.class, () -> rs.receive(message));
                    assertTrue(again.getMessage().startsWith("message already received or returned"),
                            again.getMessage());
                }
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
            removeWhatTheDeadLeft(shm, sender);
        }
    }

    /**
     * Waits until a receive started on another thread polls the held event. The double counts the
     * polls; against a real driver the segment's open (just before the event's) is what shows,
     * and a moment more lets the receive get to its polling.
     */
    private static void awaitPolling(Refshare rs, TestDouble td) throws InterruptedException {
        Eventually.await(() -> rs.cuda().stats().ipcOpens() == 1, "the receive opens the segment");
        if (td != null) {
            Eventually.await(() -> td.counter("eventNotReady") > 0, "the receive polls the held event");
        } else {
            Thread.sleep(200);
        }
    }

    /** A device tensor {@code producer} makes, then holds its stream and sends it: its event cannot complete. */
    private static byte[] sendBehindAHold(ChildJvm producer) {
        assertEquals("MADE t", send(producer, "MAKE t " + DEVICE_SEED + " " + BYTES + " cuda"));
        assertEquals("HELD", send(producer, "HOLD"));
        byte[] message = HEX.parseHex(send(producer, "FORWARD t").substring("FORWARDED ".length()));
        assertTrue(DescriptorCodec.decode(message).hasEvent(), "the send recorded an event behind the hold");
        return message;
    }

    /** How a test ends a receive that waits for a live sender's held work. */
    private interface EndTheWait {
        void end(Refshare rs, Thread receiver) throws Exception;
    }

    /** What a receive ended by an {@link EndTheWait} failed with, and whether its thread was still interrupted. */
    private record EndedReceive(Throwable failure, boolean interrupted) {
    }

    /**
     * A receive of a device block whose live sender holds its stream for good, on a thread of its
     * own, ended by {@code end} once it polls the event; checks that it ended and that its token
     * is no longer held ({@code liveAfter}: 1 when in flight again, 0 when used up), then kills
     * the sender (a real driver's hold lasts until its process exits) and checks that nothing is
     * left.
     */
    private static EndedReceive aWaitingReceiveEndedBy(int liveAfter, EndTheWait end) throws Exception {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            ProcessIdentity sender;
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicBoolean interrupted = new AtomicBoolean();
            try (ChildJvm producer = consumer(shm); Refshare rs = Refshare.open(shm.config())) {
                byte[] message = sendBehindAHold(producer);
                sender = DescriptorCodec.decode(message).sender();
                Thread receiver = Thread.ofPlatform().daemon().start(() -> {
                    try {
                        rs.receive(message).close();
                    } catch (Throwable t) {
                        failure.set(t);
                        interrupted.set(Thread.currentThread().isInterrupted());
                    }
                });
                awaitPolling(rs, td);
                assertEquals("LIVE 1", send(producer, "LIVE"), "the device block's token, claimed by the receive");
                end.end(rs, receiver);
                receiver.join(60_000); // a bound against hanging, not a timing check
                assertFalse(receiver.isAlive(), "the wait ended");
                assertEquals("LIVE " + liveAfter, send(producer, "LIVE"), "the token went back");
                Descriptor d = DescriptorCodec.decode(message);
                try (CounterFile counters = CounterFile.open(shm.directory(), d.counterFileName())) {
                    assertEquals(liveAfter == 1 ? CounterFileLayout.IN_FLIGHT : CounterFileLayout.RELEASED,
                            counters.state(d.slot()));
                    assertEquals(0, counters.heldBy(ProcessIdentity.current()), "held by nobody");
                }
                producer.kill();
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
            removeWhatTheDeadLeft(shm, sender);
            return new EndedReceive(failure.get(), interrupted.get());
        }
    }

    /**
     * Closing this process's refshare ends a receive that waits for a live sender's work, and the
     * close returns. The message is not used up: its token is in flight again, for another
     * receiver (a queue gives such a message back).
     */
    @Test
    void closingEndsAReceiveThatWaitsForALiveSendersWork() throws Exception {
        // a bound against hanging, not a timing check: a close that waited for the receive would
        // hang until the sender is killed at the end
        EndedReceive ended = aWaitingReceiveEndedBy(1, (rs, receiver) ->
                CompletableFuture.runAsync(rs::close, OWN_THREAD).get(60, TimeUnit.SECONDS));
        assertTrue(ended.failure() instanceof IllegalStateException, String.valueOf(ended.failure()));
        assertTrue(ended.failure().getMessage().contains("is closing"), String.valueOf(ended.failure()));
    }

    /**
     * An interrupt ends a receive that waits for a live sender's work; the thread keeps its
     * interrupt status, and the message is not used up (its token is in flight again).
     */
    @Test
    void anInterruptEndsAReceiveThatWaitsForALiveSendersWork() throws Exception {
        EndedReceive ended = aWaitingReceiveEndedBy(1, (rs, receiver) -> {
            receiver.interrupt();
            receiver.join(60_000); // a bound against hanging, not a timing check
            assertEquals(0, rs.cuda().stats().openSegments());
        });
        assertTrue(ended.failure() instanceof ReceiveInterruptedException, String.valueOf(ended.failure()));
        assertTrue(ended.failure().getMessage().startsWith("interrupted while waiting for the device work"),
                ended.failure().getMessage());
        assertTrue(ended.interrupted(), "the thread's interrupt status is kept");
    }

    /**
     * A sender killed while the receive waits for the device work it recorded before sending (its
     * stream held, so the event cannot complete): the receive is refused naming the sender, the
     * token goes back, the segment closes again, and this process's stream still works. A real
     * driver never completes a dead process's unfinished event: a stream made to wait for it
     * stays blocked for good (seen on an H100, driver 580.159), so the receive polls the event
     * instead, checking the sender's life meanwhile.
     */
    @Test
    void aSenderKilledWhileTheReceiveWaitsForItsWorkIsRefusedAndTheStreamStaysUsable() throws Exception {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            ProcessIdentity sender;
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofConfined()) {
                Tensor host;
                Descriptor d;
                CompletableFuture<Tensor> receiving;
                try (ChildJvm producer = consumer(shm)) {
                    host = rs.receive(shareFrom(producer, "h", HOST_SEED, "host"));
                    byte[] message = sendBehindAHold(producer);
                    d = DescriptorCodec.decode(message);
                    sender = d.sender();
                    receiving = CompletableFuture.supplyAsync(() -> rs.receive(message), OWN_THREAD);
                    awaitPolling(rs, td);
                    assertEquals("LIVE 2", send(producer, "LIVE"), "the host tensor's and the device block's tokens");
                    assertFalse(receiving.isDone(), "the receive waits for the held work");
                    producer.kill();
                }
                // a bound against hanging (the old stream wait never ended), not a timing check
                var e = assertThrows(ExecutionException.class, () -> receiving.get(60, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof RefshareException, String.valueOf(e.getCause()));
                assertTrue(e.getCause().getMessage().contains("its sender, " + sender + ", died before the device work"),
                        e.getCause().getMessage());
                CudaStats s = rs.cuda().stats();
                assertEquals(1, s.ipcOpens(), "the segment was opened before the wait");
                assertEquals(1, s.ipcCloses(), "and closed again by the refusal");
                assertEquals(0, s.openSegments());
                assertEquals(0, s.eventWaits(), "no wait ended");
                try (CounterFile counters = CounterFile.open(shm.directory(), d.counterFileName())) {
                    assertEquals(CounterFileLayout.RELEASED, counters.state(d.slot()), "the token went back");
                    assertEquals(1, counters.heldBy(ProcessIdentity.current()), "only the host tensor's token");
                }
                try (host; Tensor own = rs.allocate(Device.cuda(0), DType.UINT8, BYTES)) {
                    CudaAcrossProcessesTest.fill(rs, own, 7);
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(own, arena), 7),
                            "this process's stream was never made to wait for the dead sender");
                }
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
            removeWhatTheDeadLeft(shm, sender);
        }
    }

    @Test
    void aDeviceTensorOfALiveSenderIsReceived() throws InterruptedException {
        CudaTestSupport.require();
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            try (Refshare rs = Refshare.open(shm.config()); ChildJvm producer = consumer(shm);
                 Arena arena = Arena.ofConfined()) {
                byte[] message = shareFrom(producer, "t", DEVICE_SEED, "cuda");
                assertEquals(Verdict.ALIVE, shm.directory().verdict(DescriptorCodec.decode(message).sender()));
                try (Tensor t = rs.receive(message)) {
                    assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(t, arena), DEVICE_SEED));
                    assertEquals("LIVE 1", send(producer, "LIVE"));
                }
                CudaStats s = rs.cuda().stats();
                assertEquals(1, s.ipcOpens());
                assertEquals(1, s.ipcCloses());
                assertEquals(1, s.eventWaits());
                assertEquals("LIVE 0", send(producer, "LIVE"), "the reference went back to the live sender");
                exit(producer);
            }
            if (td != null) {
                CudaDriverTest.assertNoDeviceObjectsLeft(td);
            }
        }
    }

    /**
     * A sender with no evidence either way (UNKNOWN: here its life file removed after its death, as a
     * receiver in another PID namespace without that file would see it) is not refused: the receive
     * goes to the driver as before. The double keeps a dead process's memory readable and ends the wait
     * on its event; what a real driver does there is not known, so this needs the double.
     */
    @Test
    void aSenderNotKnownToBeDeadIsNotRefused() throws IOException {
        CudaTestSupport.requireDouble("keep a dead sender's device memory and event");
        try (TempShm shm = new TempShm()) {
            TestDouble td = testDouble(shm);
            ShmDirectory dir = shm.directory();
            ProcessIdentity sender;
            try (Refshare rs = Refshare.open(shm.config()); Arena arena = Arena.ofConfined()) {
                FromTheDead dead = shareThenDie(rs, shm);
                byte[] message = dead.message();
                Tensor host = dead.host();
                sender = DescriptorCodec.decode(message).sender();
                try (host) {
                    Eventually.await(() -> dir.removeLifeFileIfDead(sender), "the killed sender's life file can go");
                    assertEquals(Verdict.UNKNOWN, dir.verdict(sender));
                    try (Tensor t = rs.receive(message)) {
                        assertEquals(-1, Patterns.firstMismatch(rs.cuda().copyToHost(t, arena), DEVICE_SEED));
                    }
                    assertEquals(1, rs.cuda().stats().ipcOpens(), "the receive reached the driver");
                }
            }
            CudaDriverTest.assertNoDeviceObjectsLeft(td);
            removeWhatTheDeadLeft(shm, sender);
            removeFilesOwnedBy(shm, sender);
        }
    }

    /**
     * The killed sender's files: its refshare files as the janitor removes them, and the double's
     * memory and event files, which stand for what a real driver frees when a process dies.
     */
    private static void removeWhatTheDeadLeft(TempShm shm, ProcessIdentity sender) throws IOException {
        shm.directory().leave(); // this process's last Refshare is closed: its life file goes
        Janitor.sweep(shm.directory(), false);
        Pattern doubleFile = Pattern.compile("rscudadbl-(mem|ev)-" + sender.pid() + "-\\d+");
        for (String name : shm.files()) {
            if (doubleFile.matcher(name).matches()) {
                Files.delete(shm.path().resolve(name));
            }
        }
    }

    /** The janitor keeps the files of a process not known to be dead: removed by their owner's name here. */
    private static void removeFilesOwnedBy(TempShm shm, ProcessIdentity owner) throws IOException {
        for (String name : shm.files()) {
            Path path = shm.path().resolve(name);
            FileHeader header = FileHeader.readOrNull(shm.directory(), path);
            if (header != null && header.owner().equals(owner)) {
                Files.delete(path);
            }
        }
    }
}
