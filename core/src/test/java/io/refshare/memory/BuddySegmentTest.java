package io.refshare.memory;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** The buddy bookkeeping alone: splitting, merging, and the free orders the allocator's best fit reads. */
class BuddySegmentTest {
    private static final int TOP = BuddySegment.SEGMENT_SHIFT - BuddySegment.MIN_SHIFT;

    private final TestShmDirectory dir = new TestShmDirectory();
    private final HostBackend backend = new HostBackend(dir.directory());
    private final Segment segment = backend.create(BuddySegment.SEGMENT_BYTES);

    @AfterEach
    void removeDirectory() {
        backend.free(segment);
        dir.close();
    }

    @Test
    void splittingLeavesOneFreeBuddyPerOrderAndFreeingMergesThemBack() {
        BuddySegment s = new BuddySegment(segment);
        assertEquals(TOP, s.smallestFreeOrder(0), "a new segment is one free chunk of the top order");
        assertEquals(1, s.freeChunks());

        long first = s.allocate(0);
        assertEquals(0, first);
        for (int order = 0; order < TOP; order++) {
            assertEquals(order, s.smallestFreeOrder(order), "the split left a free buddy of order " + order);
        }
        assertEquals(-1, s.smallestFreeOrder(TOP), "the top chunk is split");
        assertEquals(TOP, s.freeChunks());

        long second = s.allocate(0);
        assertEquals(512, second, "the smallest free chunk is the first one's buddy");
        assertEquals(1, s.smallestFreeOrder(0), "order 0 has nothing free now");

        s.release(first, 0);
        assertEquals(0, s.smallestFreeOrder(0));
        s.release(second, 0);
        assertTrue(s.isUnused());
        assertEquals(TOP, s.smallestFreeOrder(0), "every buddy merged back into the top chunk");
        assertEquals(1, s.freeChunks());
    }

    @Test
    void aFullSegmentHasNoFreeOrderUntilABlockComesBack() {
        BuddySegment s = new BuddySegment(segment);
        int order = TOP - 2; // four blocks fill it
        List<Long> blocks = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            blocks.add(s.allocate(order));
        }
        assertEquals(-1, s.smallestFreeOrder(0));
        assertEquals(-1, s.allocate(0));
        s.release(blocks.get(2), order);
        assertEquals(order, s.smallestFreeOrder(0));
        assertEquals(-1, s.smallestFreeOrder(order + 1));
        assertEquals(blocks.get(2), s.allocate(order));
    }
    @Test
    void everySmallestBlockFitsOnceAndFitsAgainAfterFreesInAnyOrder() {
        BuddySegment s = new BuddySegment(segment);
        int blocks = 1 << TOP;
        Random random = new Random(7);
        List<Long> offsets = new ArrayList<>();
        for (int round = 0; round < 3; round++) {
            BitSet taken = new BitSet(blocks);
            for (int i = 0; i < blocks; i++) {
                long offset = s.allocate(0);
                assertTrue(offset >= 0, "block " + i + " of " + blocks + " found no room");
                int index = (int) (offset >>> BuddySegment.MIN_SHIFT);
                assertFalse(taken.get(index), "offset " + offset + " handed out twice");
                taken.set(index);
                offsets.add(offset);
            }
            assertEquals(-1, s.allocate(0), "the segment is full");
            Collections.shuffle(offsets, random);
            for (long offset : offsets) {
                s.release(offset, 0);
            }
            offsets.clear();
            assertTrue(s.isUnused());
            assertEquals(1, s.freeChunks(), "every buddy merged back, round " + round);
        }
    }

    @Test
    void randomAllocationsNeverOverlapAndAlwaysFitWhenAChunkIsFree() {
        BuddySegment s = new BuddySegment(segment);
        Random random = new Random(11);
        List<long[]> live = new ArrayList<>(); // {offset, order}
        BitSet used = new BitSet(1 << TOP); // a bit per 512 bytes
        for (int step = 0; step < 200_000; step++) {
            if (!live.isEmpty() && (random.nextInt(100) < 45 || used.cardinality() > (1 << TOP) * 7 / 8)) {
                long[] block = live.remove(random.nextInt(live.size()));
                s.release(block[0], (int) block[1]);
                int first = (int) (block[0] >>> BuddySegment.MIN_SHIFT);
                used.clear(first, first + (1 << block[1]));
                continue;
            }
            int order = random.nextInt(100) < 80 ? random.nextInt(4) : random.nextInt(TOP + 1);
            boolean fits = s.smallestFreeOrder(order) >= 0;
            long offset = s.allocate(order);
            assertEquals(fits, offset >= 0, "allocate agrees with smallestFreeOrder, order " + order);
            if (offset < 0) {
                continue;
            }
            long size = 1L << (BuddySegment.MIN_SHIFT + order);
            assertEquals(0, offset % size, "aligned to its size");
            assertTrue(offset + size <= BuddySegment.SEGMENT_BYTES);
            int first = (int) (offset >>> BuddySegment.MIN_SHIFT);
            assertTrue(used.get(first, first + (1 << order)).isEmpty(),
                    "chunk at " + offset + " of order " + order + " overlaps a live one");
            used.set(first, first + (1 << order));
            live.add(new long[] {offset, order});
        }
        for (long[] block : live) {
            s.release(block[0], (int) block[1]);
        }
        assertTrue(s.isUnused());
        assertEquals(1, s.freeChunks());
        long a = s.allocate(0);
        s.allocate(0); // its buddy stays taken, so the first cannot merge away
        s.release(a, 0);
        assertThrows(IllegalStateException.class, () -> s.release(a, 0), "a double free is caught");
    }
}
