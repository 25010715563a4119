package io.refshare.memory;

import io.refshare.stats.AllocatorStats;
import io.refshare.exceptions.OutOfSharedMemoryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CachingAllocatorTest {
    private static final long KIB = 1 << 10;
    private static final long MIB = 1 << 20;

    private final TestShmDirectory dir = new TestShmDirectory();
    private final HostBackend backend = new HostBackend(dir.directory());

    @AfterEach
    void removeDirectory() {
        dir.close();
    }

    @Test
    void roundsSmallRequestsToPowersOfTwoAndLargeOnesToTwoMebibytes() {
        assertEquals(512, CachingAllocator.sizeClassOf(0));
        assertEquals(512, CachingAllocator.sizeClassOf(1));
        assertEquals(512, CachingAllocator.sizeClassOf(512));
        assertEquals(1024, CachingAllocator.sizeClassOf(513));
        assertEquals(64 * KIB, CachingAllocator.sizeClassOf(40_000));
        assertEquals(MIB, CachingAllocator.sizeClassOf(MIB));
        assertEquals(2 * MIB, CachingAllocator.sizeClassOf(MIB + 1));
        assertEquals(4 * MIB, CachingAllocator.sizeClassOf(2 * MIB + 1));
        assertEquals(6 * MIB, CachingAllocator.sizeClassOf(5 * MIB));
        assertThrows(IllegalArgumentException.class, () -> CachingAllocator.sizeClassOf(-1));
        assertThrows(IllegalArgumentException.class,
                () -> CachingAllocator.sizeClassOf(CachingAllocator.MAX_REQUEST_BYTES + 1));
    }

    @Test
    void smallBlocksOfEveryClassShareOneSegmentWithoutOverlapping() {
        try (var allocator = new CachingAllocator(backend)) {
            long[] sizes = {1, 1, 100, 512, 513, 4096, 5000, 70_000, MIB, 0};
            List<AllocatedBlock> blocks = new ArrayList<>();
            long requested = 0;
            for (long size : sizes) {
                blocks.add(allocator.allocate(size));
                requested += size;
            }
            // the first two 1-byte requests take consecutive 512-byte chunks
            assertEquals(0, blocks.get(0).offset());
            assertEquals(512, blocks.get(1).offset());

            Segment shared = blocks.get(0).segment();
            for (int i = 0; i < blocks.size(); i++) {
                AllocatedBlock b = blocks.get(i);
                assertSame(shared, b.segment(), "block " + i + " should share the first small segment");
                assertEquals(sizes[i], b.length());
                assertEquals(sizes[i], b.memory().byteSize());
                long blockClass = CachingAllocator.sizeClassOf(sizes[i]);
                assertEquals(0, b.offset() % blockClass, "a small block is aligned to its class: " + b);
                assertEquals(0, b.memory().address() % 64, "64-byte alignment for the share layer: " + b);
            }
            List<AllocatedBlock> byOffset = new ArrayList<>(blocks);
            byOffset.sort(Comparator.comparingLong(AllocatedBlock::offset));
            for (int i = 1; i < byOffset.size(); i++) {
                AllocatedBlock prev = byOffset.get(i - 1);
                assertTrue(prev.offset() + CachingAllocator.sizeClassOf(prev.length()) <= byOffset.get(i).offset(),
                        prev + " overlaps " + byOffset.get(i));
            }

            AllocatorStats stats = allocator.stats();
            assertEquals(1, stats.segments());
            assertEquals(CachingAllocator.SMALL_SEGMENT_BYTES, stats.segmentBytes());
            assertEquals(1, stats.segmentCreations());
            assertEquals(sizes.length, stats.blocksInUse());
            assertEquals(requested, stats.bytesInUse());
            assertEquals(1, dir.fileCount());
        }
        assertEquals(0, dir.fileCount());
    }

    @Test
    void blockMemoryIsTheExactSliceOfItsSegment() {
        try (var allocator = new CachingAllocator(backend)) {
            allocator.allocate(3000);
            AllocatedBlock block = allocator.allocate(3000);
            block.memory().set(ValueLayout.JAVA_LONG, 0, 42L);
            block.memory().set(ValueLayout.JAVA_BYTE, 2999, (byte) 7);
            assertEquals(42L, block.segment().memory().get(ValueLayout.JAVA_LONG, block.offset()));
            assertEquals(7, block.segment().memory().get(ValueLayout.JAVA_BYTE, block.offset() + 2999));
            assertThrows(IndexOutOfBoundsException.class, () -> block.memory().get(ValueLayout.JAVA_BYTE, 3000));
        }
    }

    @Test
    void largeRequestsGetTheirOwnRoundedSegment() {
        try (var allocator = new CachingAllocator(backend)) {
            AllocatedBlock a = allocator.allocate(3 * MIB);
            AllocatedBlock b = allocator.allocate(3 * MIB);
            AllocatedBlock c = allocator.allocate(MIB + 1);

            assertNotSame(a.segment(), b.segment());
            assertEquals(4 * MIB, a.segment().size());
            assertEquals(4 * MIB, b.segment().size());
            assertEquals(2 * MIB, c.segment().size());
            assertEquals(0, a.offset());
            assertEquals(3 * MIB, a.memory().byteSize());
            assertEquals(3, dir.fileCount());
            assertEquals(10 * MIB, allocator.stats().segmentBytes());
        }
    }

    @Test
    void freedLargeSegmentsAreReusedWithoutNewFiles() {
        try (var allocator = new CachingAllocator(backend)) {
            AllocatedBlock first = allocator.allocate(3 * MIB);
            Segment segment = first.segment();
            first.memory().set(ValueLayout.JAVA_LONG, 0, 1L);
            long files = dir.fileCount();
            allocator.free(first);

            // same rounded size
            AllocatedBlock same = allocator.allocate(3 * MIB + 512 * KIB);
            assertSame(segment, same.segment());
            allocator.free(same);
            // smaller, within twice: still the cached 4 MiB segment
            AllocatedBlock smaller = allocator.allocate(MIB + 512 * KIB);
            assertSame(segment, smaller.segment());
            assertEquals(MIB + 512 * KIB, smaller.memory().byteSize());

            AllocatorStats stats = allocator.stats();
            assertEquals(files, dir.fileCount());
            assertEquals(1, stats.segmentCreations());
            assertEquals(3, stats.allocations());
            assertEquals(2, stats.reuses());
            assertEquals(0, stats.freeBlocks());

            // too small for the request: a new segment
            allocator.free(smaller);
            AllocatedBlock six = allocator.allocate(5 * MIB);
            assertNotSame(segment, six.segment());
            assertEquals(6 * MIB, six.segment().size());
            allocator.free(six);
            // the smallest cached segment that fits within twice the rounded request is taken
            AllocatedBlock two = allocator.allocate(MIB + 1);
            assertSame(segment, two.segment());
            // only the 6 MiB segment is left: more than twice 2 MiB is too wasteful, so a new segment
            AllocatedBlock another = allocator.allocate(MIB + 1);
            assertNotSame(six.segment(), another.segment());
            assertEquals(2 * MIB, another.segment().size());
            assertEquals(3, allocator.stats().segmentCreations());
            assertEquals(1, allocator.stats().freeBlocks());
            assertEquals(3, dir.fileCount());
        }
    }

    @Test
    void freedSmallBlocksAreReusedWithoutNewFiles() {
        try (var allocator = new CachingAllocator(backend)) {
            allocator.free(allocator.allocate(100));
            long files = dir.fileCount();
            for (int i = 0; i < 2000; i++) {
                AllocatedBlock a = allocator.allocate(1 + (i * 7919L) % MIB);
                AllocatedBlock b = allocator.allocate(1 + (i * 104_729L) % (64 * KIB));
                allocator.free(a);
                allocator.free(b);
            }
            AllocatorStats stats = allocator.stats();
            assertEquals(files, dir.fileCount());
            assertEquals(1, stats.segmentCreations());
            assertEquals(stats.allocations() - 1, stats.reuses());
            assertEquals(0, stats.blocksInUse());
            assertEquals(0, stats.bytesInUse());
            assertEquals(1, stats.freeBlocks(), "all chunks merged back into the whole segment");
        }
    }

    @Test
    void aSmallBlockComesFromTheSegmentOneJustWentBackToAndOtherwiseFromTheBestFit() {
        try (var allocator = new CachingAllocator(backend)) {
            List<AllocatedBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                blocks.add(allocator.allocate(MIB)); // two segments of four
            }
            Segment first = blocks.get(1).segment();
            Segment second = blocks.get(6).segment();
            assertNotSame(first, second);
            allocator.free(blocks.get(1));
            allocator.free(blocks.get(6));
            AllocatedBlock again = allocator.allocate(MIB);
            assertSame(second, again.segment(), "the segment the last block went back to has an exact fit");
            AllocatedBlock small = allocator.allocate(512);
            assertSame(first, small.segment(), "with no fit there, the walk finds the other segment's free chunk");
            allocator.free(again);
            allocator.free(small);
            for (int i = 0; i < 8; i++) {
                if (i != 1 && i != 6) {
                    allocator.free(blocks.get(i));
                }
            }
            assertEquals(0, allocator.stats().blocksInUse());
        }
    }

    @Test
    void missHandlerRunsBeforeGrowingAndMayFreeReentrantly() {
        List<AllocatedBlock> limbo = new ArrayList<>();
        AtomicReference<CachingAllocator> ref = new AtomicReference<>();
        List<Long> creationsSeenByHandler = new ArrayList<>();
        Runnable collectLimbo = () -> {
            CachingAllocator allocator = ref.get();
            creationsSeenByHandler.add(allocator.stats().segmentCreations());
            for (AllocatedBlock b : limbo) {
                allocator.free(b);
            }
            limbo.clear();
        };
        try (var allocator = new CachingAllocator(backend, collectLimbo)) {
            ref.set(allocator);
            AllocatedBlock sent = allocator.allocate(3 * MIB);
            assertEquals(List.of(0L), creationsSeenByHandler, "the first allocation misses an empty cache");
            limbo.add(sent);

            // no free block: the handler frees the limbo, and the retry reuses its segment
            AllocatedBlock next = allocator.allocate(3 * MIB);
            assertSame(sent.segment(), next.segment());
            assertEquals(List.of(0L, 1L), creationsSeenByHandler);
            assertEquals(1, allocator.stats().segmentCreations());
            assertEquals(1, dir.fileCount());

            // nothing to collect: the handler runs, then the allocator grows
            AllocatedBlock grown = allocator.allocate(3 * MIB);
            assertNotSame(next.segment(), grown.segment());
            assertEquals(List.of(0L, 1L, 1L), creationsSeenByHandler, "the handler ran before the segment was created");
            assertEquals(2, allocator.stats().segmentCreations());
            assertEquals(3, allocator.stats().missHandlerCalls());

            // a hit does not call the handler
            allocator.free(grown);
            allocator.allocate(3 * MIB);
            assertEquals(3, allocator.stats().missHandlerCalls());
        }
    }

    @Test
    void anAllocationMadeByTheMissHandlerDoesNotRecurse() {
        AtomicReference<CachingAllocator> ref = new AtomicReference<>();
        AtomicLong nested = new AtomicLong();
        Runnable allocating = () -> {
            nested.incrementAndGet();
            ref.get().free(ref.get().allocate(5 * MIB));
        };
        try (var allocator = new CachingAllocator(backend, allocating)) {
            ref.set(allocator);
            AllocatedBlock block = allocator.allocate(5 * MIB);
            assertEquals(1, nested.get());
            assertEquals(1, allocator.stats().missHandlerCalls());
            assertEquals(1, allocator.stats().segmentCreations(), "the handler's freed segment was reused");
            assertEquals(5 * MIB, block.length());
        }
    }

    @Test
    void capThrowsAClearErrorAndTheAllocatorStaysUsable() {
        long cap = 8 * MIB;
        AtomicLong handlerCalls = new AtomicLong();
        try (var allocator = new CachingAllocator(backend, handlerCalls::incrementAndGet, cap)) {
            AllocatedBlock four = allocator.allocate(4 * MIB);
            AllocatedBlock two = allocator.allocate(2 * MIB);
            long callsBefore = handlerCalls.get();

            var e = assertThrows(OutOfSharedMemoryException.class, () -> allocator.allocate(4 * MIB));
            assertTrue(e.getMessage().contains("cap " + cap + " bytes"), e.getMessage());
            assertTrue(e.getMessage().contains("request " + 4 * MIB + " bytes"), e.getMessage());
            assertTrue(e.getMessage().contains((6 * MIB) + " bytes in use by 2 blocks"), e.getMessage());
            assertEquals(callsBefore + 1, handlerCalls.get(), "the miss handler ran before giving up");
            assertEquals(2, dir.fileCount(), "a failed allocation leaves nothing behind");

            // freeing the 2 MiB block caches it; the next 4 MiB request releases it to stay under the cap
            allocator.free(two);
            AllocatedBlock again = allocator.allocate(4 * MIB);
            assertEquals(4 * MIB, again.length());
            AllocatorStats stats = allocator.stats();
            assertEquals(8 * MIB, stats.segmentBytes());
            assertEquals(1, stats.segmentReleases());
            assertEquals(2, dir.fileCount());

            var small = assertThrows(OutOfSharedMemoryException.class, () -> allocator.allocate(100));
            assertTrue(small.getMessage().contains("needs a new " + CachingAllocator.SMALL_SEGMENT_BYTES
                    + "-byte segment"), small.getMessage());

            allocator.free(four);
            allocator.free(again);
            assertEquals(100, allocator.allocate(100).length(), "cached large segments give way to a small one");
            assertTrue(allocator.stats().segmentBytes() <= cap);
        }
        assertEquals(0, dir.fileCount());
    }

    @Test
    void refusesDoubleFreeForeignBlocksAndUseAfterFree() {
        try (var allocator = new CachingAllocator(backend); var other = new CachingAllocator(backend)) {
            AllocatedBlock block = allocator.allocate(1000);
            AllocatedBlock large = allocator.allocate(3 * MIB);
            var foreign = assertThrows(IllegalArgumentException.class, () -> other.free(block));
            assertTrue(foreign.getMessage().contains("not allocated by this allocator"), foreign.getMessage());

            allocator.free(block);
            allocator.free(large);
            var twice = assertThrows(IllegalStateException.class, () -> allocator.free(block));
            assertTrue(twice.getMessage().contains("double free"), twice.getMessage());
            assertThrows(IllegalStateException.class, () -> allocator.free(large));
            var used = assertThrows(IllegalStateException.class, block::memory);
            assertTrue(used.getMessage().contains("was freed"), used.getMessage());
            assertEquals(0, allocator.stats().blocksInUse());
            assertThrows(IllegalArgumentException.class, () -> allocator.allocate(-5));
        }
    }

    @Test
    void freeAllReturnsEveryBlockItCanAndThenReportsTheOnesItCouldNot() {
        try (var allocator = new CachingAllocator(backend); var other = new CachingAllocator(backend)) {
            AllocatedBlock small = allocator.allocate(1000);
            AllocatedBlock large = allocator.allocate(3 * MIB);
            AllocatedBlock freedBefore = allocator.allocate(64);
            AllocatedBlock last = allocator.allocate(5000);
            AllocatedBlock foreign = other.allocate(100);
            allocator.free(freedBefore);

            var failure = assertThrows(IllegalStateException.class,
                    () -> allocator.freeAll(List.of(small, freedBefore, large, foreign, last)));
            assertTrue(failure.getMessage().contains("double free"), failure.getMessage());
            assertEquals(1, failure.getSuppressed().length);
            assertTrue(failure.getSuppressed()[0].getMessage().contains("not allocated by this allocator"));
            // the blocks before and after the bad ones went back all the same
            assertEquals(0, allocator.stats().blocksInUse());
            assertThrows(IllegalStateException.class, small::memory);
            assertThrows(IllegalStateException.class, last::memory);
            assertEquals(1, other.stats().blocksInUse(), "the foreign block is left to its own allocator");

            AllocatedBlock again = allocator.allocate(3 * MIB);
            assertSame(large.segment(), again.segment(), "the large segment went back to the cache");
            allocator.freeAll(List.of(again));
            allocator.freeAll(List.of());
            assertEquals(0, allocator.stats().blocksInUse());
        }
    }

    @Test
    void releaseCachedGivesFreeSegmentsBackAndKeepsBlocksInUse() {
        try (var allocator = new CachingAllocator(backend)) {
            AllocatedBlock kept = allocator.allocate(3 * MIB);
            allocator.free(allocator.allocate(3 * MIB));
            allocator.free(allocator.allocate(10));
            assertEquals(3, dir.fileCount());

            assertEquals(4 * MIB + CachingAllocator.SMALL_SEGMENT_BYTES, allocator.releaseCached());
            assertEquals(1, dir.fileCount());
            AllocatorStats stats = allocator.stats();
            assertEquals(1, stats.segments());
            assertEquals(2, stats.segmentReleases());
            kept.memory().set(ValueLayout.JAVA_LONG, 0, 9L);
        }
    }

    @Test
    void closeFreesEverySegmentAndInvalidatesOutstandingBlocks() {
        var allocator = new CachingAllocator(backend);
        AllocatedBlock small = allocator.allocate(64);
        AllocatedBlock large = allocator.allocate(3 * MIB);
        var heldMemory = large.memory();
        allocator.free(allocator.allocate(9 * MIB));
        assertEquals(3, dir.fileCount());

        allocator.close();
        assertEquals(0, dir.fileCount());
        assertTrue(allocator.isClosed());
        AllocatorStats stats = allocator.stats();
        assertEquals(0, stats.segments());
        assertEquals(0, stats.segmentBytes());
        assertEquals(0, stats.blocksInUse());

        var invalid = assertThrows(IllegalStateException.class, small::memory);
        assertTrue(invalid.getMessage().contains("allocator was closed"), invalid.getMessage());
        assertThrows(IllegalStateException.class, () -> heldMemory.get(ValueLayout.JAVA_BYTE, 0));
        var closed = assertThrows(IllegalStateException.class, () -> allocator.allocate(10));
        assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
        allocator.free(small); // the memory is gone already; freeing is accepted once
        assertThrows(IllegalStateException.class, () -> allocator.free(small));
        allocator.close();
        assertEquals(0, dir.fileCount());
    }
}
