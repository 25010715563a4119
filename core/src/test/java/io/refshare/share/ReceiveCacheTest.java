package io.refshare.share;

import io.refshare.counter.CounterFile;
import io.refshare.memory.HostBackend;
import io.refshare.memory.Segment;
import io.refshare.shm.ProcessIdentity;
import io.refshare.wire.Descriptor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReceiveCacheTest {
    private static final long SEGMENT_BYTES = 2 * HostBackend.HEADER_BYTES;

    @RegisterExtension
    final TempShm shm = new TempShm();

    @Test
    void idleMappingsAreBoundedAndTheLeastRecentlyIdleGoesFirst() {
        HostBackend backend = new HostBackend(shm.directory());
        List<Segment> senders = new ArrayList<>();
        ReceiveCache cache = new ReceiveCache(shm.directory(), 3);
        try {
            for (int i = 0; i < 5; i++) {
                senders.add(backend.create(SEGMENT_BYTES));
            }
            for (Segment s : senders) {
                cache.unmapSegment(map(cache, s)); // mapped for one block, then idle
            }
            assertEquals(3, cache.mappedSegments(), "the bound: two idle mappings went");

            ReceiveCache.Mapping first = map(cache, senders.get(0)); // unmapped above: mapped again
            assertEquals(4, cache.mappedSegments(), "one in use and three idle");
            ReceiveCache.Mapping last = map(cache, senders.get(4)); // still mapped: found, not mapped again
            assertEquals(4, cache.mappedSegments());
            cache.unmapSegment(last);
            cache.unmapSegment(first);
            assertEquals(3, cache.mappedSegments(), "the least recently idle (the third segment) went");
            cache.unmapSegment(map(cache, senders.get(4)));
            assertEquals(3, cache.mappedSegments(), "the most recently idle stayed mapped: found again, not mapped");
        } finally {
            cache.close();
            senders.forEach(backend::free);
        }
    }

    @Test
    void onlyIdleMappingsOfRemovedSegmentsAreDropped() {
        HostBackend backend = new HostBackend(shm.directory());
        ReceiveCache cache = new ReceiveCache(shm.directory());
        Segment idleRemoved = backend.create(SEGMENT_BYTES);
        Segment usedRemoved = backend.create(SEGMENT_BYTES);
        Segment idleKept = backend.create(SEGMENT_BYTES);
        try {
            cache.unmapSegment(map(cache, idleRemoved));
            ReceiveCache.Mapping used = map(cache, usedRemoved);
            cache.unmapSegment(map(cache, idleKept));
            backend.free(idleRemoved);
            backend.free(usedRemoved);
            assertEquals(1, cache.dropIdleRemoved(), "the idle mapping of a removed file");
            assertEquals(2, cache.mappedSegments(), "the one in use and the one whose file is there stay");
            assertEquals(0, cache.dropIdleRemoved());
            cache.unmapSegment(used);
            assertEquals(1, cache.dropIdleRemoved(), "idle now");
            assertEquals(1, cache.mappedSegments());
        } finally {
            cache.close();
            backend.free(idleKept);
        }
    }

    @Test
    void aCounterFileIsLeftOnlyOnceRetiredAndHeldByNoToken() {
        ReceiveCache cache = new ReceiveCache(shm.directory());
        CounterFile sent = CounterFile.create(shm.directory(), 8, 4);
        try {
            int slot = sent.handOut();
            CounterFile received = claimed(cache, sent, slot);
            sent.retire();
            assertEquals(0, cache.leaveIdleRetired(), "a token is held: the file stays");
            cache.releaseToken(received, slot);
            assertEquals(1, cache.mappedCounterFiles(), "a release reads nothing the sender writes: left later");
            assertEquals(1, cache.leaveIdleRetired(), "retired and no token held: left");
            assertEquals(0, cache.mappedCounterFiles());
            assertEquals(0, cache.leaveIdleRetired());

            CounterFile again = CounterFile.create(shm.directory(), 8, 4);
            try {
                cache.unholdCounters(cache.holdCounters(again.name()));
                assertEquals(0, cache.leaveIdleRetired(), "not retired: the sender may hand out more from it");
                assertEquals(1, cache.mappedCounterFiles());
            } finally {
                cache.close();
                again.unlink();
                again.close();
            }
        } finally {
            cache.close();
            sent.unlink();
            sent.close();
        }
    }

    /**
     * A release racing the close of its {@code Refshare} may be inside its wake-up of the
     * sender's collector, a system call on this cache's mapping of the counter file (a timed
     * futex wait on that mapping stands in for it here). Before, the unmap threw
     * IllegalStateException and {@code Sharing.close} stopped halfway, leaving this process's own
     * files in the directory; now it waits for the call.
     */
    @Test
    void closeWaitsForASystemCallOnACounterFileMapping() throws Exception {
        ReceiveCache cache = new ReceiveCache(shm.directory());
        CounterFile sent = CounterFile.create(shm.directory(), 8, 4);
        try {
            CounterFile received = claimed(cache, sent, sent.handOut());
            InSystemCall.on(received, () -> assertEquals(1, cache.close(), "the token held is given back"));
            assertFalse(received.isMapped());
        } finally {
            sent.unlink();
            sent.close();
        }
    }

    /**
     * Blocks released after the close (by the leak detector's cleaner, or by a close that raced
     * the context's) find their mappings gone. Before, each made its mapping idle again in the
     * cleared cache, and past the idle bound the eviction found none: NullPointerException.
     */
    @Test
    void releasesAfterTheCloseAreQuiet() {
        HostBackend backend = new HostBackend(shm.directory());
        ReceiveCache cache = new ReceiveCache(shm.directory(), 1);
        Segment a = backend.create(SEGMENT_BYTES);
        Segment b = backend.create(SEGMENT_BYTES);
        try {
            ReceiveCache.Mapping ma = map(cache, a);
            ReceiveCache.Mapping mb = map(cache, b);
            cache.close();
            cache.unmapSegment(ma);
            cache.unmapSegment(mb);
            assertEquals(0, cache.mappedSegments());
        } finally {
            backend.free(a);
            backend.free(b);
        }
    }

    /** A receive (of a host or a device block) that raced its context's close finds the cache closed: nothing is held or mapped. */
    @Test
    void aReceiveAfterTheCloseHoldsAndMapsNothing() {
        HostBackend backend = new HostBackend(shm.directory());
        ReceiveCache cache = new ReceiveCache(shm.directory());
        Segment segment = backend.create(SEGMENT_BYTES);
        CounterFile sent = CounterFile.create(shm.directory(), 8, 4);
        try {
            Descriptor d = Descriptor.host(segment.name(), segment.exportOffset() + segment.size(),
                    segment.exportOffset(), 64, sent.name(), sent.handOut(), null, ProcessIdentity.current());
            cache.close();
            assertThrows(IllegalStateException.class, () -> cache.holdAndMap(d));
            assertThrows(IllegalStateException.class, () -> cache.holdCountersToReceive(sent.name()), "a device receive");
            assertEquals(0, cache.mappedCounterFiles());
            assertEquals(0, cache.mappedSegments());
        } finally {
            sent.unlink();
            sent.close();
            backend.free(segment);
        }
    }

    /** {@code sent}'s token in {@code slot}, held through {@code cache} and claimed: the cache's mapping of the file. */
    private static CounterFile claimed(ReceiveCache cache, CounterFile sent, int slot) {
        CounterFile received = cache.holdCounters(sent.name());
        assertTrue(received.claim(slot));
        return received;
    }

    private static ReceiveCache.Mapping map(ReceiveCache cache, Segment s) {
        return cache.mapSegment(s.name(), s.exportOffset() + s.size(), s.exportOffset()); // as a descriptor names it
    }
}
