package io.refshare.share;

import io.refshare.exceptions.InvalidDataException;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.inspect.Janitor;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.BackgroundThreads;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import io.refshare.testing.TruncatingOpener;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Counter and status files that another process of this uid damaged (garbage written into
 * them, or truncated under the producer's mappings) while the producer's collector runs.
 * Nothing may wedge or kill a thread: the damaged counter file is quarantined and a fresh
 * one used, and the references of a consumer killed afterwards are still reclaimed.
 * Everything a caller sees is a {@link RefshareException}.
 */
class DamagedFilesTest {
    private static final long BYTES = 50_000;

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void garbageInTheNextSlotRetiresTheFileAndTheNextShareUsesAFreshOne() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            Tensor t = producer.allocateBytes(BYTES);
            Patterns.fill(t.data(), 1);
            byte[] first = producer.share(t);
            String damaged = counterFileOf(first);
            writeSlot(damaged, 1, 0x00C0FFEE_00000001L); // "in flight" under a tag nobody handed out
            byte[] second = producer.share(t); // once: IllegalStateException "slot 1 was not free", for good
            assertNotEquals(damaged, counterFileOf(second), "a fresh counter file after the damaged one");
            byte[] third = producer.share(t);
            assertEquals(counterFileOf(second), counterFileOf(third), "and it stays in use");
            t.close();
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                List<byte[]> messages = List.of(first, second, third);
                for (int i = 0; i < messages.size(); i++) {
                    consumer.send("RECV m" + i + " 1 " + HexFormat.of().formatHex(messages.get(i)));
                    assertEquals("OK m" + i, consumer.read(), "every message arrives intact");
                }
                consumer.send("EXIT");
                assertEquals("BYE", consumer.read());
                assertEquals(0, consumer.waitFor());
            } finally {
                consumer.kill();
            }
            producer.collect();
            assertEquals(1, producer.stats().limboBlocks(),
                    "the block one of whose references lies in the quarantined file stays in the limbo");
            assertEquals(2, producer.stats().ownCounterFiles(), "the quarantined file is kept until close");
            BackgroundThreads.assertAlive();
        }
        sweepDeadProcessesFiles();
    }

    @Test
    void garbageOverALiveTokenQuarantinesTheFileAndReclamationGoesOn() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                byte[] kept = shareTo(producer, consumer, "a", 1);
                writeSlot(counterFileOf(kept), 0, 0x7FL); // a state no transition produces
                Thread.sleep(300); // collector rounds over the damaged file
                byte[] later = shareTo(producer, consumer, "b", 2);
                assertNotEquals(counterFileOf(kept), counterFileOf(later));
                BackgroundThreads.assertAlive();
            } finally {
                consumer.kill();
            }
            Eventually.await(() -> producer.stats().reclaimed() == 1,
                    "the killed consumer's reference in the fresh file is reclaimed");
            producer.collect();
            assertEquals(1, producer.stats().limboBlocks(), "the block counted in the damaged file stays");
        }
        sweepDeadProcessesFiles();
    }

    @Test
    void aCounterFileTruncatedUnderTheSleepingCollectorIsQuarantined() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                byte[] first = shareTo(producer, consumer, "a", 1);
                // the collector sleeps on this file's release word while the block waits in the limbo
                truncate(counterFileOf(first), 64);
                Thread.sleep(300);
                BackgroundThreads.assertAlive();
                byte[] second = shareTo(producer, consumer, "b", 2);
                assertNotEquals(counterFileOf(first), counterFileOf(second), "a fresh file for new shares");
                producer.collect(); // still works
                try (Tensor pressure = producer.allocateBytes(BYTES)) {
                    assertEquals(BYTES, pressure.data().byteSize());
                }
            } finally {
                consumer.kill();
            }
            Eventually.await(() -> producer.stats().reclaimed() == 1,
                    "a consumer killed after the damage is still reclaimed");
            BackgroundThreads.assertAlive();
        }
        sweepDeadProcessesFiles();
    }

    @Test
    void allocationPressureStillCollectsAfterACounterFileWasQuarantined() throws Exception {
        try (Refshare producer = Refshare.open(shm.config().withCapacityBytes(16 << 20));
             Refshare consumer = Refshare.open(shm.config())) {
            Tensor before;
            byte[] first;
            try (Tensor t = producer.allocateBytes(1 << 20)) {
                first = producer.share(t);
                before = consumer.receive(first);
            }
            truncate(counterFileOf(first), 64); // under the collector, which sleeps on it
            Thread.sleep(300);
            BackgroundThreads.assertAlive();
            Tensor big;
            try (Tensor t = producer.allocateBytes(10 << 20)) {
                Patterns.fill(t.data(), 5);
                byte[] second = producer.share(t);
                assertNotEquals(counterFileOf(first), counterFileOf(second), "shared from a fresh file");
                big = consumer.receive(second);
            }
            assertEquals(-1, Patterns.firstMismatch(big.data(), 5));
            big.close();
            try (Tensor again = producer.allocateBytes(10 << 20)) {
                assertEquals(10 << 20, again.data().byteSize(), "the block from the fresh file was collected");
            }
            before.close();
        }
    }

    @Test
    void aTruncatedStatusFileStopsNoReclamation() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            truncate(ownFile(ShmKind.STATUS), 8);
            Thread.sleep(300); // the housekeeper publishes its status every 100 ms
            BackgroundThreads.assertAlive();
            ChildJvm consumer = ChildJvm.start(ShareChildMain.class, "ConsumerMain", shm.path().toString());
            try {
                shareTo(producer, consumer, "a", 1);
                shareTo(producer, consumer, "b", 2);
            } finally {
                consumer.kill();
            }
            Eventually.await(() -> producer.stats().limboBlocks() == 0 && producer.stats().reclaimed() >= 2,
                    "the killed consumer's references come back");
            assertEquals(2, producer.stats().reclaimed(), "each once");
            BackgroundThreads.assertAlive();
        }
        sweepDeadProcessesFiles();
    }

    @Test
    void aReceiverOfATruncatedCounterFileGetsARefshareException() throws Exception {
        try (Refshare producer = Refshare.open(shm.config()); Refshare consumer = Refshare.open(shm.config())) {
            Tensor t = producer.allocateBytes(BYTES);
            Patterns.fill(t.data(), 3);
            byte[] first = producer.share(t);
            byte[] second = producer.share(t);
            t.close();
            consumer.receive(first).close(); // the consumer maps the counter file
            truncate(counterFileOf(first), 64);
            // through the existing mapping (a fault on the truncated page) ...
            assertDamaged(() -> consumer.receive(second), "through the existing mapping");
            // ... and opened afresh
            try (Refshare another = Refshare.open(shm.config())) {
                assertThrows(InvalidDataException.class, () -> another.receive(second));
            }
            Thread.sleep(300);
            BackgroundThreads.assertAlive();
            try (Tensor u = producer.allocateBytes(BYTES)) {
                Patterns.fill(u.data(), 4);
                try (Tensor back = consumer.receive(producer.share(u))) {
                    assertEquals(-1, Patterns.firstMismatch(back.data(), 4), "new shares work");
                }
            }
        } // closing the consumer leaves the damaged file without a fault escaping
    }

    /**
     * The same truncation once the receive path is compiled: compiled code gets the fault as an
     * InternalError at its next safepoint check, after the read that faulted (which yields a
     * wrong word, so the claim fails), not inside the claim. A wrapper around the claim alone let
     * it escape from the fourth or fifth round on (three runs of three).
     */
    @Test
    void aFaultThatCompiledCodeSeesLateIsStillARefshareException() throws Exception {
        inWarmedRounds((producer, consumer, t) -> consumer.receive(producer.share(t)).close(),
                (producer, consumer, t, round) -> {
                    byte[] first = producer.share(t);
                    byte[] second = producer.share(t);
                    t.close();
                    consumer.receive(first).close();
                    truncate(counterFileOf(first), 64);
                    assertDamaged(() -> consumer.receive(second), "round " + round);
                });
    }

    /**
     * Closing a received tensor whose sender's counter file was truncated meanwhile, once the
     * close path is compiled: the token cannot be given back, which is logged, and no fault
     * escapes from {@code close}, nor from the producer's own close of the tensor (which looks at
     * the token in the same file), nor from closing either {@code Refshare}.
     */
    @Test
    void closingAfterTheSendersCounterFileWasTruncatedThrowsNothing() throws Exception {
        inWarmedRounds((producer, consumer, t) -> consumer.receive(producer.share(t)).close(),
                (producer, consumer, t, round) -> {
                    Tensor held = consumer.receive(producer.share(t));
                    truncate(counterFileOf(producer.share(t)), 64);
                    assertDoesNotThrow(held::close, () -> "the consumer's close, round " + round);
                    assertDoesNotThrow(t::close, () -> "the producer's close, round " + round);
                    BackgroundThreads.assertAlive();
                });
    }

    /** Cancelling a message of a truncated counter file, once the cancel path is compiled: a RefshareException. */
    @Test
    void cancellingThroughATruncatedCounterFileGetsARefshareException() throws Exception {
        inWarmedRounds((producer, consumer, t) -> assertTrue(consumer.cancel(producer.share(t))),
                (producer, consumer, t, round) -> {
                    byte[] m = producer.share(t);
                    t.close();
                    truncate(counterFileOf(m), 64);
                    assertDamaged(() -> consumer.cancel(m), "round " + round);
                });
    }

    /**
     * A sender whose own current counter file is cut short by another process, once its share
     * path is compiled: the next shares go to a fresh file (or fail with a RefshareException),
     * never with the JVM's InternalError, and a consumer can receive them.
     */
    @Test
    void aSenderWhoseCounterFileWasTruncatedSharesOnCompiled() throws Exception {
        inWarmedRounds((producer, consumer, t) -> assertTrue(producer.cancel(producer.share(t))),
                (producer, consumer, t, round) -> {
                    truncate(counterFileOf(producer.share(t)), 64);
                    for (int i = 0; i < 3; i++) {
                        byte[] m;
                        try {
                            m = producer.share(t);
                        } catch (RefshareException reported) {
                            continue;
                        } catch (Throwable e) {
                            throw new AssertionError("round " + round + ": " + e, e);
                        }
                        try (Tensor back = consumer.receive(m)) {
                            assertEquals(4096, back.data().byteSize());
                        } catch (RefshareException reported) {
                            // a message of the damaged file, refused
                        }
                    }
                    assertDoesNotThrow(t::close, () -> "round " + round);
                    BackgroundThreads.assertAlive();
                });
    }

    private interface Step {
        void run(Refshare producer, Refshare consumer, Tensor t) throws Exception;
    }

    private interface Check {
        void run(Refshare producer, Refshare consumer, Tensor t, int round) throws Exception;
    }

    /**
     * Ten rounds, each with a fresh producer and consumer and a 4 KiB tensor of the producer's:
     * {@code warm} 20,000 times, then {@code check}. Compiled code reports a fault on a cut file
     * late, at its next safepoint check; the later rounds run the compiled paths.
     */
    private void inWarmedRounds(Step warm, Check check) throws Exception {
        for (int round = 0; round < 10; round++) {
            try (Refshare producer = Refshare.open(shm.config()); Refshare consumer = Refshare.open(shm.config())) {
                Tensor t = producer.allocateBytes(4096);
                for (int i = 0; i < 20_000; i++) {
                    warm.run(producer, consumer, t);
                }
                check.run(producer, consumer, t, round);
            }
        }
    }

    private static byte[] shareTo(Refshare producer, ChildJvm consumer, String id, long seed) {
        try (Tensor t = producer.allocateBytes(BYTES)) {
            Patterns.fill(t.data(), seed);
            byte[] m = producer.share(t);
            consumer.send("RECV " + id + " " + seed + " " + HexFormat.of().formatHex(m));
            assertEquals("OK " + id, consumer.read());
            return m;
        }
    }

    /**
     * A segment cut short after a receiver opened and sized it, before the check of its header:
     * a RefshareException, never the JVM's fault raw, and no mapping or held counter file left.
     * The window is microseconds wide, so a child JVM cuts and restores the file on one thread
     * while it receives with a fresh context (a fresh open) on another, until it has met the
     * window a few times ({@link TruncatingReceiverMain}).
     */
    @Test
    void aSegmentTruncatedWhileAReceiverOpensItIsARefshareException() throws Exception {
        try (Refshare producer = Refshare.open(shm.config())) {
            Tensor t = producer.allocateBytes(BYTES);
            byte[] message = producer.share(t);
            t.close();
            try (ChildJvm receiver = ChildJvm.start(ShareChildMain.class, "TruncatingReceiverMain",
                    shm.path().toString(), HexFormat.of().formatHex(message), "segment", "20", "3")) {
                TruncatingOpener.assertMetAndNothingLeft(receiver);
            }
            // the message was left for another receiver whenever a receive failed
        }
        sweepDeadProcessesFiles();
    }

    /**
     * The same for the sender's counter file, which a receive opens first (the receive cache's
     * hold, which the child makes in a fresh cache each time; {@link TruncatingReceiverMain} says
     * why not the whole receive): a RefshareException, and the file neither mapped nor held. The
     * sender is a child too ({@link ProducerMain}): its background threads read its counter file
     * and meet the cuts, which must not happen in this JVM.
     */
    @Test
    void aCounterFileTruncatedWhileAReceiverOpensItIsARefshareException() throws Exception {
        try (ChildJvm producer = ChildJvm.start(ShareChildMain.class, "ProducerMain", shm.path().toString(),
                String.valueOf(BYTES), "1")) {
            try (ChildJvm receiver = ChildJvm.start(ShareChildMain.class, "TruncatingReceiverMain",
                    shm.path().toString(), producer.read(), "counters", "20", "3")) {
                TruncatingOpener.assertMetAndNothingLeft(receiver);
            } finally {
                producer.kill();
            }
        }
        sweepDeadProcessesFiles(); // the killed producer's
    }

    private static String counterFileOf(byte[] message) {
        return DescriptorCodec.decode(message).counterFileName();
    }

    private void writeSlot(String counterFile, int slot, long word) {
        CounterSlots.write(shm.directory(), counterFile, slot, word);
    }

    private void truncate(String name, long size) throws IOException {
        try (FileChannel ch = FileChannel.open(shm.path().resolve(name), StandardOpenOption.WRITE)) {
            ch.truncate(size);
        }
    }

    private String ownFile(ShmKind kind) throws IOException {
        ShmDirectory dir = shm.directory();
        for (String name : shm.files()) {
            if (dir.kindOf(name) == kind
                    && ProcessIdentity.current().equals(FileHeader.read(shm.path().resolve(name)).owner())) {
                return name;
            }
        }
        throw new AssertionError("no " + kind + " file of this process in " + shm.files());
    }

    /** The killed consumers' status and life files, as the janitor removes them. */
    private void sweepDeadProcessesFiles() throws IOException {
        Janitor.sweep(shm.directory(), false);
    }

    /** {@code call} fails with a RefshareException that says the file is damaged. */
    private static void assertDamaged(Executable call, String when) {
        RefshareException e = assertThrows(RefshareException.class, call, when);
        assertTrue(e.getMessage().contains("damaged"), e.getMessage());
    }
}
