package io.refshare.holder;

import io.refshare.Internals;
import io.refshare.SharedHolder;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.Refshare;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A shared holder between refshare contexts of one process (the multi-process test is separate). */
class SharedHolderTest {

    private static long publishPattern(Refshare rs, SharedHolder holder, long seed) {
        try (Tensor t = rs.allocate(DType.FLOAT32, 64, 32)) {
            Patterns.fill(t.data(), seed);
            return holder.publish(t);
        }
    }

    @Test
    void readersSeeTheCurrentVersionAndOldOnesAreFreedWhenTheLastReaderLetsGo() throws Exception {
        try (TempShm shm = new TempShm();
             Refshare publisherRs = Refshare.open(shm.config());
             Refshare readerRs = Refshare.open(shm.config())) {
            SharedHolder publisher = publisherRs.createHolder();
            SharedHolder reader = readerRs.openHolder(publisher.name());
            assertNull(reader.acquire(), "nothing published yet");
            assertEquals(1, publishPattern(publisherRs, publisher, 1));
            Tensor v1 = reader.acquire();
            assertArrayEquals(new long[]{64, 32}, v1.shape());
            assertEquals(DType.FLOAT32, v1.dtype());
            assertEquals(-1, Patterns.firstMismatch(v1.data(), 1));
            assertEquals(2, publishPattern(publisherRs, publisher, 2));
            try (Tensor v2 = reader.acquire()) {
                assertEquals(-1, Patterns.firstMismatch(v2.data(), 2));
            }
            assertEquals(-1, Patterns.firstMismatch(v1.data(), 1), "a held version stays intact after re-pointing");
            assertEquals(2, publisherRs.stats().limboBlocks(),
                    "both versions wait in the publisher's limbo: 1 held by the reader, 2 by the holder");
            assertEquals(0, publisher.stats().retired());
            v1.close();
            assertEquals(1, reader.stats().retired());
            assertEquals(1, reader.stats().retiredHere(), "the reader let go last and returned the token");
            Eventually.await(Duration.ofSeconds(20), () -> publisherRs.stats().limboBlocks() == 1,
                    "version 1 freed, version 2 is current");
            SharedHolder.Stats s = publisher.stats();
            assertEquals(2, s.published());
            assertEquals(1, s.liveVersions());
            assertEquals(0, s.anomalies());
            HolderFile.Figures peeked = HolderFile.peek(Internals.sharing(publisherRs).directory(), publisher.name());
            assertEquals(2, peeked.published(), "read without attaching");
            assertEquals(1, peeked.retired());
            assertEquals(1, peeked.readers().size(), "one row for this process (both handles); peeking took none");
            publisher.close();
            // the reader process still holds its share of version 2 (no tensor): its background round lets it go
            Eventually.await(Duration.ofSeconds(20), () -> reader.stats().retired() == 2,
                    "closing the creator retires the current version once the reader's round gives back its share");
            reader.close();
            assertTrue(publisherRs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, Internals.sharing(publisherRs).liveCounts());
            assertEquals(0, shm.count(ShmKind.HOLDER.tag()), "the creator removed the holder's name");
        }
    }

    @Test
    void threadsOfOneProcessTakeOneSharedReferencePerVersionWhichAnIdleRoundGivesBack() throws Exception {
        try (TempShm shm = new TempShm();
             Refshare publisherRs = Refshare.open(shm.config());
             Refshare readerRs = Refshare.open(shm.config());
             SharedHolder publisher = publisherRs.createHolder(4, 4)) {
            SharedHolder reader = readerRs.openHolder(publisher.name());
            publishPattern(publisherRs, publisher, 1);
            ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
            Runnable read = () -> {
                for (int i = 0; i < 10_000; i++) {
                    try (Tensor t = reader.acquire()) {
                        if (t.data().get(ValueLayout.JAVA_BYTE, 0) != Patterns.byteAt(1, 0)) {
                            wrong.add("iteration " + i);
                        }
                    }
                }
            };
            Thread a = Thread.ofPlatform().start(read);
            Thread b = Thread.ofPlatform().start(read);
            a.join();
            b.join();
            assertEquals(List.of(), List.copyOf(wrong));
            try (ShmFile f = Internals.sharing(publisherRs).directory().open(publisher.name(), ShmKind.HOLDER, 0)) {
                HolderFile file = new HolderFile(f.segment(),
                        SharedHolderLayout.readGeometry(f.segment(), f.path().toString()), HolderWord.DEFAULT_DRAIN_AT);
                long word = file.word();
                // the two threads' first acquires may both find no share: the loser's reference lives only for its use
                assertTrue(HolderWord.count(word) <= 2, "20,000 tensors, " + HolderWord.count(word)
                        + " acquisitions through the holder word");
                int row = file.registerReader(io.refshare.shm.ProcessIdentity.current().packed()); // this process's row
                assertEquals(1, file.held(row, HolderWord.slot(word)), "the process holds one reference: its share");
            }
            publishPattern(publisherRs, publisher, 2); // by another handle: the reader's handle acquires no more
            long replaced = System.nanoTime();
            assertEquals(0, publisher.stats().retired(), "the reader's share still holds version 1");
            Eventually.await(Duration.ofSeconds(2), () -> publisher.stats().retired() == 1,
                    "the reader handle's background round gave back its share of version 1");
            System.out.printf("idle handle: version 1 retired %d ms after it was replaced%n",
                    (System.nanoTime() - replaced) / 1_000_000);
            assertEquals(1, reader.stats().retiredHere(), "retired by the reader handle's round");
            reader.close();
            publisher.close();
            assertTrue(publisherRs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, Internals.sharing(publisherRs).liveCounts());
        }
    }

    @Test
    void aRefshareClosedWithItsHolderHandleOpenGivesBackTheProcesssShare() {
        try (TempShm shm = new TempShm();
             Refshare publisherRs = Refshare.open(shm.config());
             SharedHolder publisher = publisherRs.createHolder(4, 4)) {
            Refshare readerRs = Refshare.open(shm.config());
            SharedHolder reader = readerRs.openHolder(publisher.name());
            publishPattern(publisherRs, publisher, 1);
            try (Tensor t = reader.acquire()) {
                assertEquals(-1, Patterns.firstMismatch(t.data(), 1));
            }
            readerRs.close(); // the handle is left open: its share of version 1 goes back now
            assertThrows(IllegalStateException.class, reader::acquire);
            publishPattern(publisherRs, publisher, 2);
            assertEquals(1, publisher.stats().retired(), "nobody holds version 1 any more: retired by the publish");
            reader.close();
            publisher.close();
            assertEquals(2, publisher.stats().retired());
            assertTrue(publisherRs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, Internals.sharing(publisherRs).liveCounts());
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void theCreatorsCloseEmptiesTheHolderForEveryone() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            SharedHolder creator = rs.createHolder();
            SharedHolder other = rs.openHolder(creator.name());
            publishPattern(rs, other, 5); // any process may publish
            Tensor held = creator.acquire();
            creator.close();
            assertTrue(other.isClosed());
            assertNull(other.acquire(), "empty after the creator closed");
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> publishPattern(rs, other, 6));
            assertTrue(e.getMessage().contains("closed by its creator"), e.getMessage());
            assertThrows(IllegalStateException.class, creator::acquire);
            assertEquals(-1, Patterns.firstMismatch(held.data(), 5), "tensors handed out outlive their handle");
            assertEquals(0, other.stats().retired());
            held.close();
            assertEquals(1, other.stats().retired());
            other.close();
            other.close();
            assertEquals(0, Internals.sharing(rs).liveCounts(), "every version retired returned its token; the refused publish took none");
        }
    }

    @Test
    void aFullVersionTableRefusesThePublishAndReturnsItsToken() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             SharedHolder holder = rs.createHolder(2, 4)) {
            publishPattern(rs, holder, 1);
            try (Tensor a = holder.acquire()) {
                publishPattern(rs, holder, 2);
                IllegalStateException e = assertThrows(IllegalStateException.class,
                        () -> publishPattern(rs, holder, 3));
                assertTrue(e.getMessage().contains("all 2 version slots"), e.getMessage());
                assertEquals(2, Internals.sharing(rs).liveCounts(), "the refused version's token came back at once");
                assertEquals(-1, Patterns.firstMismatch(a.data(), 1));
            }
            publishPattern(rs, holder, 3);
            try (Tensor c = holder.acquire()) {
                assertEquals(-1, Patterns.firstMismatch(c.data(), 3));
            }
            holder.close();
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
        }
    }

    @Test
    void aVersionForwardedOnwardLivesUntilTheLastProcessAnywhereLetsGo() throws Exception {
        try (TempShm shm = new TempShm();
             Refshare publisherRs = Refshare.open(shm.config());
             Refshare readerRs = Refshare.open(shm.config());
             Refshare thirdRs = Refshare.open(shm.config())) {
            SharedHolder publisher = publisherRs.createHolder();
            SharedHolder reader = readerRs.openHolder(publisher.name());
            publishPattern(publisherRs, publisher, 7);
            byte[] message;
            try (Tensor t = reader.acquire()) {
                message = readerRs.share(t); // forwarding what the holder gave us
            }
            publishPattern(publisherRs, publisher, 8);
            assertEquals(0, publisher.stats().retired(), "version 1 lives on in the forwarded message");
            try (Tensor forwarded = thirdRs.receive(message)) {
                assertEquals(-1, Patterns.firstMismatch(forwarded.data(), 7));
            }
            Eventually.await(Duration.ofSeconds(20), () -> publisher.stats().retired() == 1,
                    "the reader's collector releases the version once the forwarded copy came back");
            Eventually.await(Duration.ofSeconds(20), () -> publisherRs.stats().limboBlocks() == 1,
                    "only the current version is left");
            reader.close();
            publisher.close();
            assertTrue(publisherRs.awaitLimboEmpty(Duration.ofSeconds(10)));
        }
    }

    @Test
    void aClosedHandleStillReleasesWhatItHandedOut() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            SharedHolder creator = rs.createHolder();
            SharedHolder reader = rs.openHolder(creator.name());
            publishPattern(rs, creator, 1);
            Tensor t = reader.acquire();
            reader.close();
            assertThrows(IllegalStateException.class, reader::acquire);
            assertEquals(1, t.data().get(ValueLayout.JAVA_BYTE, 0) == Patterns.byteAt(1, 0) ? 1 : 0);
            publishPattern(rs, creator, 2);
            t.close(); // releases through the closed handle's mapping, then unmaps it
            assertEquals(1, creator.stats().retired());
            creator.close();
        }
    }

    @Test
    void filesThatAreNotHoldersAreRefused() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            ShmFile blank = Internals.sharing(rs).directory().create(ShmKind.HOLDER, 64 << 10);
            try {
                InvalidDataException e = assertThrows(InvalidDataException.class,
                        () -> rs.openHolder(blank.name()));
                assertTrue(e.getMessage().contains("not a refshare holder file"), e.getMessage());
            } finally {
                blank.unlink();
                blank.close();
            }
            try (SharedHolder real = rs.createHolder(4, 4)) {
                ShmFile small = Internals.sharing(rs).directory().create(ShmKind.HOLDER, 4096);
                try {
                    // a header copied from a real holder onto a file too short for it
                    ShmFile original = Internals.sharing(rs).directory().open(real.name(), ShmKind.HOLDER, 0);
                    small.segment().copyFrom(original.segment().asSlice(0, SharedHolderLayout.HEADER_LENGTH));
                    original.close();
                    InvalidDataException e = assertThrows(InvalidDataException.class,
                            () -> rs.openHolder(small.name()));
                    assertTrue(e.getMessage().contains("truncated"), e.getMessage());
                } finally {
                    small.unlink();
                    small.close();
                }
            }
            assertThrows(InvalidDataException.class, () -> rs.openHolder("../../etc/passwd"));
            assertFalse(shm.files().stream().anyMatch(n -> n.contains("-hold-")));
        }
    }

    /**
     * A holder file cut short by another process under a reader whose acquire and release are
     * compiled (compiled code gets the fault late, at its next safepoint check): acquiring,
     * closing what was acquired, publishing and closing the handles throw nothing but
     * RefshareExceptions (or IllegalStateException: the publisher's slots may all be taken).
     */
    @Test
    void aHolderFileCutUnderACompiledReaderGivesRefshareExceptionsOnly() throws Exception {
        for (int round = 0; round < 10; round++) { // the compiled paths are reached in the later rounds
            try (TempShm shm = new TempShm(); Refshare publisherRs = Refshare.open(shm.config());
                 Refshare readerRs = Refshare.open(shm.config())) {
                SharedHolder holder = publisherRs.createHolder(3, 2);
                SharedHolder reader = readerRs.openHolder(holder.name());
                publishUniform(publisherRs, holder, 1);
                for (int i = 0; i < 20_000; i++) {
                    reader.acquire().close();
                    if (i % 4 == 0) {
                        publishUniform(publisherRs, holder, i); // the publisher's path, compiled too
                    }
                }
                Tensor held = reader.acquire();
                try (FileChannel ch = FileChannel.open(shm.path().resolve(holder.name()), StandardOpenOption.WRITE)) {
                    ch.truncate(64);
                }
                int r = round;
                List<ThrowingRunnable> calls = List.of(() -> {
                    Tensor t = reader.acquire(); // null: nothing found, which a cut file may say too
                    if (t != null) {
                        t.close();
                    }
                }, held::close, () -> {
                    try (Tensor next = publisherRs.allocate(DType.INT64, 512)) {
                        holder.publish(next);
                    }
                }, reader::close, holder::close);
                for (ThrowingRunnable call : calls) {
                    try {
                        call.run();
                    } catch (RefshareException | IllegalStateException reported) {
                        // the cut file, reported; or a handle already closed by the call before
                    } catch (Throwable t) {
                        throw new AssertionError("round " + r + ": " + t, t);
                    }
                }
            }
        }
    }

    private interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void readersOnTwoThreadsSeeWholeVersionsWhileSlotsAreReused() throws Exception {
        try (TempShm shm = new TempShm(); Refshare publisherRs = Refshare.open(shm.config());
             Refshare readerRs = Refshare.open(shm.config()); SharedHolder holder = publisherRs.createHolder(3, 2)) {
            SharedHolder reader = readerRs.openHolder(holder.name());
            publishUniform(publisherRs, holder, 1);
            AtomicBoolean publishing = new AtomicBoolean(true);
            ConcurrentLinkedQueue<String> torn = new ConcurrentLinkedQueue<>();
            Runnable read = () -> {
                while (publishing.get()) {
                    try (Tensor t = reader.acquire()) { // the block borrows the handle's mapping of the version
                        long first = t.data().get(ValueLayout.JAVA_LONG, 0);
                        for (long at = 0; at < t.data().byteSize(); at += 8) {
                            if (t.data().get(ValueLayout.JAVA_LONG, at) != first) {
                                torn.add("version " + first + " changed at byte " + at);
                            }
                        }
                    }
                }
            };
            Thread a = Thread.ofPlatform().start(read);
            Thread b = Thread.ofPlatform().start(read);
            for (long v = 2; v <= 2_000; v++) {
                publishUniform(publisherRs, holder, v);
            }
            publishing.set(false);
            a.join();
            b.join();
            assertEquals(List.of(), List.copyOf(torn));
            reader.close();
            holder.clear();
            assertEquals(holder.stats().published(), holder.stats().retired());
            assertTrue(publisherRs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, Internals.sharing(publisherRs).liveCounts());
        }
    }

    /** Publishes a tensor whose every element is {@code value}; retries while all slots are held by readers. */
    private static void publishUniform(Refshare rs, SharedHolder holder, long value) throws InterruptedException {
        try (Tensor t = rs.allocate(DType.INT64, 512)) {
            for (long at = 0; at < t.data().byteSize(); at += 8) {
                t.data().set(ValueLayout.JAVA_LONG, at, value);
            }
            while (true) {
                try {
                    holder.publish(t);
                    return;
                } catch (IllegalStateException slotsFull) {
                    Thread.sleep(1);
                }
            }
        }
    }

    @Test
    void manyPublishesReuseSlotsAndLeaveNothingBehind() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             SharedHolder holder = rs.createHolder(3, 2)) {
            for (int i = 1; i <= 5_000; i++) {
                publishPattern(rs, holder, i);
                if (i % 10 == 0) {
                    try (Tensor t = holder.acquire()) {
                        assertNotNull(t);
                        assertEquals(-1, Patterns.firstMismatch(t.data(), i));
                    }
                }
            }
            assertEquals(4_999, holder.stats().retired());
            holder.clear();
            assertEquals(5_000, holder.stats().retired());
            assertEquals(0, holder.stats().liveVersions());
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, Internals.sharing(rs).liveCounts());
        }
    }
}
