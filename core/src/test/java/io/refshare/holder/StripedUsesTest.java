package io.refshare.holder;

import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.*;

class StripedUsesTest {

    @Test
    void aCloseWithNothingInUseReleasesAtOnceAndOnlyOnce() {
        AtomicInteger releases = new AtomicInteger();
        StripedUses uses = new StripedUses(releases::incrementAndGet);
        assertTrue(uses.close());
        assertTrue(uses.isClosed());
        assertEquals(1, releases.get());
        assertFalse(uses.close(), "a second close does nothing");
        assertFalse(uses.enter(), "nothing enters a closed handle");
        assertFalse(uses.enter());
        assertEquals(1, releases.get(), "refused enters do not release again");
    }

    @Test
    void theLastUseReleasesAfterTheCloseWhicheverThreadLeaves() throws Exception {
        AtomicInteger releases = new AtomicInteger();
        StripedUses uses = new StripedUses(releases::incrementAndGet);
        assertTrue(uses.enter());
        assertTrue(uses.enter());
        Thread other = Thread.ofPlatform().start(uses::leave); // left on another thread's stripe, before the close
        other.join();
        assertTrue(uses.enter());
        uses.close();
        assertEquals(0, releases.get(), "two uses in progress");
        other = Thread.ofPlatform().start(uses::leave); // left on a closed stripe
        other.join();
        assertFalse(uses.enter());
        assertEquals(0, releases.get(), "one use still in progress");
        uses.leave();
        assertEquals(1, releases.get());
    }

    @Test
    void usesLeftOnManyThreadsBeforeAndAfterTheCloseReleaseOnce() throws Exception {
        AtomicInteger releases = new AtomicInteger();
        StripedUses uses = new StripedUses(releases::incrementAndGet);
        int n = 4 * ThreadStripes.STRIPES;
        for (int i = 0; i < n; i++) {
            assertTrue(uses.enter());
        }
        for (int i = 0; i < n / 2; i++) {
            Thread.ofPlatform().start(uses::leave).join();
        }
        uses.close();
        for (int i = n / 2; i < n; i++) {
            assertEquals(0, releases.get(), (n - i) + " uses still in progress");
            Thread.ofPlatform().start(uses::leave).join();
        }
        assertEquals(1, releases.get());
    }
}
