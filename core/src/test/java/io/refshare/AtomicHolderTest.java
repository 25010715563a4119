package io.refshare;

import io.refshare.holder.HolderWord;
import io.refshare.holder.ThreadStripes;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AtomicHolderTest {

    /** A value that knows whether, and how often, it was destroyed. */
    static final class Item {
        final long id;
        final AtomicInteger destroyed = new AtomicInteger();

        Item(long id) {
            this.id = id;
        }

        void destroy() {
            destroyed.incrementAndGet();
        }
    }

    @Test
    void emptyHolderAcquiresNothing() {
        try (AtomicHolder<Item> holder = new AtomicHolder<>()) {
            assertNull(holder.acquire());
            assertEquals(0, holder.liveVersions());
        }
    }

    @Test
    void replacedVersionIsDestroyedAtOnceWhenNobodyHoldsIt() {
        AtomicHolder<Item> holder = new AtomicHolder<>();
        Item a = new Item(1);
        Item b = new Item(2);
        holder.set(a, Item::destroy);
        try (AtomicHolder.Ref<Item> r = holder.acquire()) {
            assertSame(a, r.get());
        }
        assertEquals(0, a.destroyed.get(), "current version lives while the holder points at it");
        holder.set(b, Item::destroy);
        assertEquals(1, a.destroyed.get());
        assertEquals(1, holder.liveVersions());
        holder.close();
        assertEquals(1, b.destroyed.get());
        assertEquals(0, holder.liveVersions());
        assertNull(holder.acquire(), "closed holder is empty");
        assertThrows(IllegalStateException.class, () -> holder.set(new Item(3), Item::destroy));
    }

    @Test
    void lastReaderDestroysTheOldVersionAndNotBefore() {
        AtomicHolder<Item> holder = new AtomicHolder<>();
        Item a = new Item(1);
        holder.set(a, Item::destroy);
        AtomicHolder.Ref<Item> r1 = holder.acquire();
        AtomicHolder.Ref<Item> r2 = holder.acquire();
        r1.release(); // released before the transfer: the version's own count is net negative now
        AtomicHolder.Ref<Item> r3 = holder.acquire();
        holder.set(new Item(2), Item::destroy);
        assertEquals(0, a.destroyed.get());
        r3.release();
        assertEquals(0, a.destroyed.get());
        r2.release();
        assertEquals(1, a.destroyed.get(), "destroyed by the last release");
        assertEquals(1, holder.liveVersions());
        holder.close();
        assertEquals(0, holder.liveVersions());
    }

    @Test
    void releasesFromManyThreadsAreCountedOnceEitherSideOfTheSet() throws Exception {
        AtomicHolder<Item> holder = new AtomicHolder<>();
        Item a = new Item(1);
        holder.set(a, Item::destroy);
        List<AtomicHolder.Ref<Item>> refs = new ArrayList<>();
        for (int i = 0; i < 4 * ThreadStripes.STRIPES; i++) {
            refs.add(holder.acquire());
        }
        int half = refs.size() / 2;
        for (AtomicHolder.Ref<Item> ref : refs.subList(0, half)) {
            Thread.ofPlatform().start(ref::release).join(); // while pinned: counted on each thread's stripe
        }
        holder.set(new Item(2), Item::destroy);
        for (AtomicHolder.Ref<Item> ref : refs.subList(half, refs.size() - 1)) {
            Thread.ofPlatform().start(ref::release).join(); // stripes closed: counted on the version's own count
            assertEquals(0, a.destroyed.get(), "destroyed while a reference is still held");
        }
        Thread.ofPlatform().start(refs.getLast()::release).join();
        assertEquals(1, a.destroyed.get(), "destroyed by the last release, once");
        holder.close();
        assertEquals(0, holder.liveVersions());
    }

    @Test
    void exchangeHandsTheOldVersionToTheCaller() {
        AtomicHolder<Item> holder = new AtomicHolder<>();
        assertNull(holder.exchange(new Item(0), Item::destroy), "nothing to hand back from an empty holder");
        AtomicHolder.Ref<Item> reader = holder.acquire();
        Item a = reader.get();
        AtomicHolder.Ref<Item> old = holder.exchange(new Item(1), Item::destroy);
        assertSame(a, old.get(), "the caller holds the replaced version");
        old.release();
        assertEquals(0, a.destroyed.get(), "the reader still holds it");
        reader.release();
        assertEquals(1, a.destroyed.get());
        holder.close();
    }

    @Test
    void refsRejectUseAfterRelease() {
        try (AtomicHolder<Item> holder = new AtomicHolder<>()) {
            holder.set(new Item(1), Item::destroy);
            AtomicHolder.Ref<Item> r = holder.acquire();
            r.release();
            assertTrue(r.isReleased());
            assertThrows(IllegalStateException.class, r::get);
            assertThrows(IllegalStateException.class, r::release);
            r.close(); // a no-op once released
        }
    }

    @Test
    void drainingKeepsCountsExactOverManyAcquisitions() {
        // drain every 3 acquisitions: the external count keeps moving into the version's count
        AtomicHolder<Item> holder = new AtomicHolder<>(4, 3);
        Item a = new Item(1);
        holder.set(a, Item::destroy);
        List<AtomicHolder.Ref<Item>> refs = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            refs.add(holder.acquire());
            if (i % 7 == 0) {
                refs.removeFirst().release();
            }
        }
        holder.set(new Item(2), Item::destroy);
        for (int i = 0; i < refs.size() - 1; i++) {
            refs.get(i).release();
            assertEquals(0, a.destroyed.get(), "destroyed with " + (refs.size() - 1 - i) + " references out");
        }
        refs.getLast().release();
        assertEquals(1, a.destroyed.get());
        holder.close();
    }

    @Test
    void emptyHolderForgetsItsCount() {
        AtomicHolder<Item> holder = new AtomicHolder<>(2, 4);
        for (int i = 0; i < 100; i++) {
            assertNull(holder.acquire());
        }
        Item a = new Item(1);
        holder.set(a, Item::destroy);
        holder.clear();
        assertEquals(1, a.destroyed.get(), "acquisitions of the empty holder held nothing");
    }

    @Test
    void fullVersionTableRefusesToInstallUntilReadersLetGo() {
        AtomicHolder<Item> holder = new AtomicHolder<>(2);
        holder.set(new Item(1), Item::destroy);
        AtomicHolder.Ref<Item> held = holder.acquire();
        holder.set(new Item(2), Item::destroy);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> holder.set(new Item(3), Item::destroy));
        assertTrue(e.getMessage().contains("all 2 version slots"), e.getMessage());
        assertEquals(2, holder.acquire().get().id, "a refused set changes nothing");
        held.release();
        holder.set(new Item(3), Item::destroy);
        holder.close();
    }

    @Test
    void aThrowingDestroyActionStillFreesTheSlot() {
        AtomicHolder<Item> holder = new AtomicHolder<>(2);
        holder.set(new Item(1), v -> {
            throw new IllegalArgumentException("boom");
        });
        assertThrows(IllegalArgumentException.class, () -> holder.set(new Item(2), Item::destroy));
        assertEquals(1, holder.liveVersions(), "the new version is in; the old slot was freed");
        holder.close();
        assertEquals(0, holder.liveVersions());
    }

    /**
     * Readers acquire, check and release in a loop while a publisher keeps re-pointing; a
     * small version table forces constant slot reuse and a tiny drain threshold keeps the
     * drain path racing with exchanges.
     */
    @ParameterizedTest(name = "drain every {0}")
    @ValueSource(ints = {1, 5, HolderWord.DEFAULT_DRAIN_AT})
    void readersNeverSeeADestroyedVersionAndEveryVersionIsDestroyedOnce(int drainAt) throws Exception {
        int readers = 3;
        AtomicHolder<Item> holder = new AtomicHolder<>(readers * 2 + 2, drainAt);
        ConcurrentLinkedQueue<Item> all = new ConcurrentLinkedQueue<>();
        AtomicLong nextId = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong violations = new AtomicLong();
        AtomicLong reads = new AtomicLong();
        CountDownLatch started = new CountDownLatch(readers);
        Item first = new Item(nextId.getAndIncrement());
        all.add(first);
        holder.set(first, Item::destroy);
        List<Thread> threads = new ArrayList<>();
        for (int r = 0; r < readers; r++) {
            threads.add(Thread.ofPlatform().start(() -> {
                started.countDown();
                long last = -1;
                long n = 0;
                while (!stop.get() || n < 10_000) {
                    try (AtomicHolder.Ref<Item> ref = holder.acquire()) {
                        AtomicHolder.Ref<Item> nested = (n & 3) == 0 ? holder.acquire() : null;
                        Item item = ref.get();
                        if (item.destroyed.get() != 0 || item.id < last) {
                            violations.incrementAndGet();
                        }
                        last = item.id;
                        if (nested != null) {
                            if (nested.get().destroyed.get() != 0) {
                                violations.incrementAndGet();
                            }
                            nested.release();
                        }
                    }
                    n++;
                }
                reads.addAndGet(n);
            }));
        }
        started.await();
        for (int i = 0; i < 100_000; i++) {
            Item next = new Item(nextId.getAndIncrement());
            all.add(next);
            holder.set(next, Item::destroy);
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        holder.close();
        assertEquals(0, violations.get(), "a reader saw a destroyed version (or time going backwards)");
        assertTrue(reads.get() >= readers * 10_000L);
        for (Item item : all) {
            assertEquals(1, item.destroyed.get(), "version " + item.id + " destroyed exactly once");
        }
        assertEquals(0, holder.liveVersions());
        assertFalse(holder.toString().isEmpty());
    }
}
