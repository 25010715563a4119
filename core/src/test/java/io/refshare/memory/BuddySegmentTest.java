package io.refshare.memory;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

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
}
