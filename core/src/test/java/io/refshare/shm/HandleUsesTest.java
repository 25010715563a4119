package io.refshare.shm;

import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.*;

class HandleUsesTest {

    @Test
    void aCloseWithNothingInUseReleasesAtOnceAndOnlyOnce() {
        AtomicInteger releases = new AtomicInteger();
        HandleUses uses = new HandleUses(releases::incrementAndGet);
        assertTrue(uses.close());
        assertEquals(1, releases.get());
        assertFalse(uses.close(), "a second close does nothing");
        assertFalse(uses.enter(), "nothing enters a closed handle");
        assertFalse(uses.enter());
        assertEquals(1, releases.get(), "refused enters do not release again");
        uses.awaitReleased();
    }

    @Test
    void theLastUseReleasesAfterTheClose() throws Exception {
        AtomicInteger releases = new AtomicInteger();
        HandleUses uses = new HandleUses(releases::incrementAndGet);
        assertTrue(uses.enter());
        assertTrue(uses.enter());
        uses.close();
        assertTrue(uses.isClosed());
        assertEquals(0, releases.get(), "two uses in progress");
        Thread waiter = Thread.ofPlatform().start(uses::awaitReleased);
        uses.leave();
        assertFalse(uses.enter());
        assertEquals(0, releases.get(), "one use still in progress");
        uses.leave();
        assertEquals(1, releases.get());
        waiter.join(5_000);
        assertFalse(waiter.isAlive(), "awaitReleased returned once the release ran");
    }
}
