package io.refshare.share;

import io.refshare.counter.CounterFile;
import io.refshare.counter.CounterFileLayout;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CounterFilePoolTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    /**
     * Every message sent takes the pool's lock ({@code handOut}); judging peers opens and locks
     * their life files, slow on this seldom-compiled path, so it must not hold that lock.
     */
    @Test
    void judgingLivePeersLeavesThePoolsLockFree() throws Exception {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 16, 4, () -> { });
        long token = pool.handOut(0);
        String name = new String(pool.fileName(token), StandardCharsets.US_ASCII);
        try (CounterFile peer = CounterFile.open(shm.directory(), name)) {
            assertTrue(peer.claim(CounterFilePool.slot(token)), "this process is now a live peer of the file");
            CountDownLatch locked = new CountDownLatch(1);
            CountDownLatch done = new CountDownLatch(1);
            Thread holder = Thread.ofPlatform().start(() -> {
                synchronized (pool) {
                    locked.countDown();
                    try {
                        done.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            try {
                locked.await();
                CompletableFuture<Integer> reclaimed = CompletableFuture.supplyAsync(pool::reclaimDeadHolders);
                assertEquals(0, reclaimed.get(30, TimeUnit.SECONDS), "nobody is dead, and the lock was not needed");
            } finally {
                done.countDown();
                holder.join();
            }
            assertTrue(peer.release(CounterFilePool.slot(token)));
        } finally {
            pool.close();
        }
    }

    @Test
    void aBatchHandsOutInOrderAndGoesOnInAFreshFileWhenTheCurrentOneIsDamaged() {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 16, 4, () -> { });
        try {
            long first = pool.handOut(7);
            String damaged = fileNameOf(pool, first);
            writeSlot(damaged, 3, 0x00C0FFEE_00000001L); // another process wrote into the next slots
            int[] tags = {1, 2, 3, 4};
            long[] tokens = new long[4];
            pool.handOutAll(tags, tokens, 4);
            assertEquals(damaged, fileNameOf(pool, tokens[0]));
            assertEquals(damaged, fileNameOf(pool, tokens[1]));
            assertEquals(2, CounterFilePool.slot(tokens[1]), "slots in order");
            assertNotEquals(damaged, fileNameOf(pool, tokens[2]), "the slot found damaged went to a fresh file");
            assertEquals(fileNameOf(pool, tokens[2]), fileNameOf(pool, tokens[3]));
            for (int i = 0; i < 4; i++) {
                CounterFile f = pool.file(tokens[i]);
                assertEquals(CounterFileLayout.IN_FLIGHT, f.state(CounterFilePool.slot(tokens[i])));
                assertEquals(tags[i], f.tag(CounterFilePool.slot(tokens[i])), "each token bound to its own tag");
            }
        } finally {
            pool.close();
        }
    }

    /** A batch is all or nothing: the tokens handed out before the one that failed are cancelled and counted back. */
    @Test
    void aBatchThatCannotBeHandedOutWholeHandsOutNothing() throws Exception {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 4, 4, () -> { });
        try {
            long first = pool.handOut(9);
            try (CounterFile view = CounterFile.open(shm.directory(), fileNameOf(pool, first))) {
                for (String f : shm.files()) {
                    Files.delete(shm.path().resolve(f));
                }
                Files.delete(shm.path()); // no fresh file can be made once slots 1..3 are out
                int[] tags = {1, 2, 3, 4, 5};
                assertThrows(RuntimeException.class, () -> pool.handOutAll(tags, new long[5], 5));
                for (int slot = 1; slot <= 3; slot++) {
                    assertEquals(CounterFileLayout.RELEASED, view.state(slot), "slot " + slot + " given back");
                }
                assertEquals(CounterFileLayout.IN_FLIGHT, view.state(0), "the token handed out before stays out");
            }
            assertEquals(1, pool.handedOut(), "the failed batch counts no token as handed out");
        } finally {
            pool.close();
        }
    }

    /**
     * Making a file took about 300 µs, inside the share that needed it: the pool asks for the
     * next one when a hand-out reaches the middle of the current file, {@code tidy} (the
     * housekeeper) makes it, and the share after the last slot uses it without making a file.
     */
    @Test
    void theNextFileIsMadeAheadAndTheShareAfterTheLastSlotMakesNone() {
        AtomicInteger asked = new AtomicInteger();
        CounterFilePool pool = new CounterFilePool(shm.directory(), 8, 4, asked::incrementAndGet);
        try {
            long first = pool.handOut(1);
            handOut(pool, 3);
            assertEquals(0, asked.get(), "slots 0..3: nothing asked yet");
            pool.handOut(1);
            assertEquals(1, asked.get(), "slot 4, the middle: the next file is asked for once");
            pool.handOut(1);
            assertEquals(1, asked.get());
            assertEquals(1, shm.count("cnt"));
            pool.tidy();
            List<String> withSpare = shm.files();
            assertEquals(2, shm.count("cnt"), "the spare is made");
            assertEquals(2, pool.liveFiles(), "and counted as ours");
            pool.tidy();
            assertEquals(withSpare, shm.files(), "and made once");
            pool.handOut(1);
            pool.handOut(1); // slot 7, the last: the file retires
            long next = pool.handOut(1);
            assertNotEquals(fileNameOf(pool, first), fileNameOf(pool, next));
            assertEquals(withSpare, shm.files(), "the share after the last slot made no file: it took the spare");
            assertEquals(2, pool.liveFiles(), "the retired file (its tokens are out) and the current one");
            assertEquals(0, CounterFilePool.slot(next));
        } finally {
            pool.close();
        }
        assertEquals(0, shm.count("cnt"), "closing removes the files, the spare too");
    }

    /** Without a spare ready (the housekeeper late, or none), a share makes the file itself, as before. */
    @Test
    void aShareMakesTheNextFileItselfWhenNoSpareIsReady() {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 2, 4, () -> { });
        try {
            long a = pool.handOut(1);
            pool.handOut(1);
            long b = pool.handOut(1);
            assertNotEquals(fileNameOf(pool, a), fileNameOf(pool, b));
            assertEquals(2, shm.count("cnt"));
        } finally {
            pool.close();
        }
    }

    /** A spare made while the pool closes (the housekeeper was at it) is removed, not left behind. */
    @Test
    void aSpareWantedWhenThePoolClosesIsNotMade() {
        AtomicInteger asked = new AtomicInteger();
        CounterFilePool pool = new CounterFilePool(shm.directory(), 4, 4, asked::incrementAndGet);
        handOut(pool, 3); // slot 2 of 4 is the middle
        assertEquals(1, asked.get(), "a spare is asked for");
        pool.close();
        pool.tidy();
        assertEquals(0, shm.count("cnt"));
    }

    /**
     * Unmapping a used file took about 240 µs, inside the share whose prune saw its last token
     * back: a removed file leaves the directory at the end of that prune, and the next
     * {@code tidy} unmaps it.
     */
    @Test
    void aFileWhoseTokensAllCameBackLeavesTheDirectoryAtOnceAndIsUnmappedByTidy() throws IOException {
        AtomicInteger asked = new AtomicInteger();
        CounterFilePool pool = new CounterFilePool(shm.directory(), 2, 4, asked::incrementAndGet);
        try {
            long a = pool.handOut(5);
            long b = pool.handOut(5); // the file retires
            CounterFile file = pool.file(a);
            assertTrue(file.cancel(CounterFilePool.slot(a), 5));
            assertTrue(file.cancel(CounterFilePool.slot(b), 5));
            int askedBefore = asked.get();
            assertTrue(pool.isReturned(a, 5));
            assertTrue(pool.isReturned(b, 5));
            assertEquals(1, shm.count("cnt"), "a check only counts (so that a throw means 'not counted')");
            pool.removeFinished(); // as the prune that made the checks does next
            assertEquals(0, shm.count("cnt"), "unlinked with its last token back");
            assertEquals(askedBefore, asked.get(), "no wake-up of its own: the tidier's next run unmaps it");
            assertTrue(mapped(file.name()), "still mapped until the tidier runs");
            pool.tidy();
            assertFalse(mapped(file.name()), "unmapped");
        } finally {
            pool.close();
        }
    }

    /**
     * The hand-overs between a sending thread and the housekeeper take no lock: with files of 8
     * slots, a sender whose tokens all come back at once (so files retire and are removed all the
     * time) races a thread that tidies without pause. Every token is handed out once, from a file
     * that is ours, and nothing is left once the pool closes.
     */
    @Test
    void sendsRacingTheTidierHandOutEveryTokenOnceAndLeaveNothing() throws Exception {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 8, 4, () -> { });
        AtomicBoolean sending = new AtomicBoolean(true);
        Thread tidier = Thread.ofPlatform().start(() -> {
            while (sending.get()) {
                pool.tidy();
            }
        });
        Set<String> tokens = new HashSet<>();
        try {
            for (int i = 0; i < 20_000; i++) {
                long token = pool.handOut(3);
                assertTrue(tokens.add(fileNameOf(pool, token) + "#" + CounterFilePool.slot(token)), "handed out twice");
                assertTrue(pool.file(token).cancel(CounterFilePool.slot(token), 3));
                assertTrue(pool.isReturned(token, 3));
                pool.removeFinished();
            }
        } finally {
            sending.set(false);
            tidier.join();
            pool.close();
        }
        assertEquals(20_000, tokens.size());
        assertEquals(0, shm.count("cnt"), "every file removed, the spare too");
    }

    /** A pool closing while the housekeeper makes its spare leaves no file behind, whichever comes first. */
    @Test
    void closingWhileTheSpareIsMadeLeavesNoFile() throws Exception {
        for (int round = 0; round < 200; round++) {
            AtomicInteger asked = new AtomicInteger();
            CounterFilePool pool = new CounterFilePool(shm.directory(), 4, 4, asked::incrementAndGet);
            handOut(pool, 3); // slot 2 of 4 is the middle: a spare is wanted
            assertEquals(1, asked.get());
            CountDownLatch go = new CountDownLatch(1);
            Thread tidier = Thread.ofPlatform().start(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                pool.tidy();
            });
            go.countDown();
            pool.close();
            tidier.join();
            assertEquals(0, shm.count("cnt"), "round " + round);
        }
    }

    /**
     * A thread of ours inside a system call on a file (a cancel's futex wake-up holds the file's
     * mapping while it runs; a timed futex wait stands in for it here, to widen the window) when
     * the collector unpins that file, every token of it back: the unmap is left to the
     * housekeeper, and the collector's next unpin leaves the file it pins then (the current one)
     * mapped. Before, the first unmap threw and the next unpin unmapped the current file.
     */
    @Test
    void theCollectorLeavesTheUnmapOfAFileInASystemCallToTheHousekeeper() throws Exception {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 2, 4, () -> { });
        try {
            long a = pool.handOut(5);
            long b = pool.handOut(5); // the file retires: the collector sleeps on it
            CounterFile retired = pool.pinFileToSleepOn();
            assertEquals(retired, pool.file(a));
            cancelAndSeeBack(pool, a, b);
            InSystemCall.on(retired, pool::unpin);
            pool.tidy();
            assertFalse(mapped(retired.name()), "unmapped by the housekeeper once the call returned");
            long c = pool.handOut(5);
            CounterFile current = pool.pinFileToSleepOn();
            assertEquals(current, pool.file(c));
            pool.unpin();
            assertEquals(CounterFileLayout.IN_FLIGHT, current.state(CounterFilePool.slot(c)), "the current file stays mapped");
        } finally {
            pool.close();
        }
        assertEquals(0, shm.count("cnt"));
    }

    /** As above for a file the housekeeper unmaps: one in a system call is unmapped at its next round. */
    @Test
    void theHousekeeperUnmapsAFileInASystemCallAtItsNextRound() throws Exception {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 2, 4, () -> { });
        try {
            long a = pool.handOut(5);
            long b = pool.handOut(5);
            CounterFile removed = pool.file(a);
            cancelAndSeeBack(pool, a, b);
            InSystemCall.on(removed, pool::tidy);
            pool.tidy();
            assertFalse(mapped(removed.name()), "unmapped once the call returned");
        } finally {
            pool.close();
        }
        assertEquals(0, shm.count("cnt"));
    }

    /** A share that passed its context's open check while the context closed: no token, and no file left. */
    @Test
    void aHandOutAfterTheCloseThrowsAndMakesNoFile() {
        CounterFilePool pool = new CounterFilePool(shm.directory(), 8, 4, () -> { });
        pool.handOut(1);
        pool.close();
        assertThrows(IllegalStateException.class, () -> pool.handOut(1));
        assertThrows(IllegalStateException.class, () -> pool.handOutAll(new int[] {1}, new long[1], 1));
        assertEquals(0, shm.count("cnt"));
    }

    /** Cancels tokens {@code a} and {@code b}, the whole of a retired 2-slot file, and lets the pool see them back. */
    private static void cancelAndSeeBack(CounterFilePool pool, long a, long b) {
        CounterFile file = pool.file(a);
        assertTrue(file.cancel(CounterFilePool.slot(a), 5));
        assertTrue(file.cancel(CounterFilePool.slot(b), 5));
        assertTrue(pool.isReturned(a, 5));
        assertTrue(pool.isReturned(b, 5));
        pool.removeFinished();
    }

    /** Whether this process maps a file of this name (the kernel's list, not the arena's state). */
    private static boolean mapped(String fileName) throws IOException {
        try (Stream<String> maps = Files.lines(Path.of("/proc/self/maps"))) {
            return maps.anyMatch(line -> line.contains(fileName));
        }
    }

    /** Hands out {@code n} tokens of tag 1. */
    private static void handOut(CounterFilePool pool, int n) {
        for (int i = 0; i < n; i++) {
            pool.handOut(1);
        }
    }

    private static String fileNameOf(CounterFilePool pool, long token) {
        return new String(pool.fileName(token), StandardCharsets.US_ASCII);
    }

    private void writeSlot(String counterFile, int slot, long word) {
        CounterSlots.write(shm.directory(), counterFile, slot, word);
    }
}
