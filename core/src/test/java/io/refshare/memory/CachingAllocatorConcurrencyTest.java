package io.refshare.memory;

import io.refshare.stats.AllocatorStats;
import io.refshare.exceptions.OutOfSharedMemoryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CachingAllocatorConcurrencyTest {
    private static final long MIB = 1 << 20;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private final TestShmDirectory dir = new TestShmDirectory();

    @AfterEach
    void removeDirectory() {
        dir.close();
    }

    /**
     * Threads allocate, fill each block with a pattern unique to it, verify it before giving the block
     * up, and give half of their blocks to a shared "limbo" that the miss handler frees (re-entrantly,
     * from whichever thread missed). Two blocks sharing a byte would corrupt one another's pattern.
     * A cap makes threads compete for growth and run into the release-and-retry path.
     */
    @Test
    void concurrentThreadsNeverShareBytesAndStayUnderTheCap() throws Exception {
        long cap = 48 * MIB;
        ConcurrentLinkedQueue<Tagged> limbo = new ConcurrentLinkedQueue<>();
        AtomicReference<CachingAllocator> ref = new AtomicReference<>();
        List<String> failures = new CopyOnWriteArrayList<>();
        Runnable collectLimbo = () -> {
            Tagged t;
            while ((t = limbo.poll()) != null) {
                verify(t, failures);
                ref.get().free(t.block);
            }
        };
        AtomicLong capRefusals = new AtomicLong();
        int threads = 4;
        int operations = 1500;
        try (var allocator = new CachingAllocator(new HostBackend(dir.directory()), collectLimbo, cap)) {
            ref.set(allocator);
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int w = 0; w < threads; w++) {
                int worker = w;
                workers.add(Thread.ofPlatform().name("allocator-worker-" + w).start(() -> {
                    SplittableRandom random = new SplittableRandom(worker);
                    List<Tagged> live = new ArrayList<>();
                    try {
                        start.await();
                        for (int i = 0; i < operations; i++) {
                            if (live.size() >= 12 || (!live.isEmpty() && random.nextBoolean())) {
                                Tagged t = live.remove(random.nextInt(live.size()));
                                if (random.nextBoolean()) {
                                    limbo.add(t);
                                } else {
                                    verify(t, failures);
                                    allocator.free(t.block);
                                }
                                continue;
                            }
                            long size = random.nextInt(10) == 0
                                    ? MIB + random.nextLong(3 * MIB)
                                    : random.nextLong(64 * 1024);
                            AllocatedBlock block;
                            try {
                                block = allocator.allocate(size);
                            } catch (OutOfSharedMemoryException e) {
                                capRefusals.incrementAndGet();
                                continue;
                            }
                            if (block.offset() % CachingAllocator.BLOCK_ALIGNMENT != 0
                                    || block.memory().address() % 64 != 0) {
                                failures.add("misaligned block " + block);
                            }
                            Tagged t = new Tagged(block, ((long) worker << 40) | i);
                            fill(t);
                            live.add(t);
                            if (allocator.stats().segmentBytes() > cap) {
                                failures.add("over the cap: " + allocator.stats());
                            }
                        }
                        for (Tagged t : live) {
                            verify(t, failures);
                            allocator.free(t.block);
                        }
                    } catch (Throwable e) {
                        failures.add(Thread.currentThread().getName() + ": " + e);
                    }
                }));
            }
            start.countDown();
            for (Thread t : workers) {
                t.join();
            }
            collectLimbo.run();

            assertEquals(List.of(), failures);
            AllocatorStats stats = allocator.stats();
            assertEquals(0, stats.blocksInUse(), stats.toString());
            assertEquals(0, stats.bytesInUse(), stats.toString());
            assertTrue(stats.segmentBytes() <= cap, stats.toString());
            assertEquals(stats.segments(), dir.fileCount(), "one file per held segment");
            assertTrue(stats.reuses() > stats.segmentCreations(), "caching should dominate: " + stats);
            assertEquals(stats.allocations(), stats.reuses() + stats.segmentCreations(),
                    "every allocation either reused held memory or created one segment: " + stats);
        }
        assertEquals(0, dir.fileCount());
    }

    /**
     * The miss handler and every backend call must run without the allocator lock: each of them
     * here asks another thread to take the lock (through stats()) and waits for it. Were the lock
     * held, that thread could not finish (the wait is only a guard against hanging the build).
     */
    @Test
    void missHandlerAndBackendNeverRunUnderTheAllocatorLock() throws Exception {
        AtomicReference<CachingAllocator> ref = new AtomicReference<>();
        List<String> violations = new CopyOnWriteArrayList<>();
        AtomicInteger probes = new AtomicInteger();
        Runnable probe = () -> {
            probes.incrementAndGet();
            Thread other = Thread.ofPlatform().daemon().start(() -> ref.get().stats());
            try {
                if (!other.join(java.time.Duration.ofSeconds(20))) {
                    violations.add("the allocator lock was held during " + new Throwable().getStackTrace()[2]);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        HostBackend host = new HostBackend(dir.directory());
        SegmentBackend probing = new SegmentBackend() {
            @Override
            public Segment create(long bytes) {
                probe.run();
                return host.create(bytes);
            }

            @Override
            public void free(Segment segment) {
                probe.run();
                host.free(segment);
            }
        };
        var allocator = new CachingAllocator(probing, probe, 12 * MIB);
        ref.set(allocator);
        try {
            AllocatedBlock small = allocator.allocate(100);          // miss + create
            AllocatedBlock large = allocator.allocate(3 * MIB);      // miss + create
            allocator.free(large);
            allocator.allocate(7 * MIB);                             // miss + cap pressure: free cached + create
            allocator.free(small);
            allocator.releaseCached();                               // free
        } finally {
            allocator.close();                                       // free
        }
        assertEquals(List.of(), violations);
        assertEquals(3 + 3 + 3, probes.get(), "3 miss handler runs, 3 creations, 3 frees");
        assertEquals(0, dir.fileCount());
    }

    private record Tagged(AllocatedBlock block, long tag) {
    }

    private static void fill(Tagged t) {
        MemorySegment m = t.block.memory();
        long stride = stride(m);
        for (long i = 0; i + 8 <= m.byteSize(); i += stride) {
            m.set(LONG, i, t.tag ^ i);
        }
        for (long i = m.byteSize() & ~7L; i < m.byteSize(); i++) {
            m.set(ValueLayout.JAVA_BYTE, i, (byte) (t.tag ^ i));
        }
    }

    private static void verify(Tagged t, List<String> failures) {
        MemorySegment m = t.block.memory();
        long stride = stride(m);
        for (long i = 0; i + 8 <= m.byteSize(); i += stride) {
            if (m.get(LONG, i) != (t.tag ^ i)) {
                failures.add("block " + t.block + " was overwritten at " + i);
                return;
            }
        }
        for (long i = m.byteSize() & ~7L; i < m.byteSize(); i++) {
            if (m.get(ValueLayout.JAVA_BYTE, i) != (byte) (t.tag ^ i)) {
                failures.add("block " + t.block + " was overwritten at byte " + i);
                return;
            }
        }
    }

    /** Every word of a small block; every 512th byte of a large one (keeps the test fast, still catches any overlap). */
    private static long stride(MemorySegment m) {
        return m.byteSize() <= CachingAllocator.MAX_SMALL_BYTES ? 8 : CachingAllocator.BLOCK_ALIGNMENT;
    }
}
