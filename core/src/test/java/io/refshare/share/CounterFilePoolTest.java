package io.refshare.share;

import io.refshare.counter.CounterFile;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
        CounterFilePool pool = new CounterFilePool(shm.directory(), 16, 4);
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
}
