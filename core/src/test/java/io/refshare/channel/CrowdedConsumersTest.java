package io.refshare.channel;

import io.refshare.channel.ShmQueueLayout.Geometry;
import io.refshare.shm.ShmDirectory;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

class CrowdedConsumersTest {
    private static final long LATER = 2 * ShmQueue.SWEEP_INTERVAL_MILLIS * 1_000_000L;

    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    @Test
    void crowdedOnceAsManyParticipantsHaveTakenAsThereAreCpus() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            CrowdedConsumers crowded = new CrowdedConsumers(table(view, q));
            long now = System.nanoTime();
            assertFalse(crowded.crowded(now), "no consumer yet");
            List<ShmQueue> consumers = new ArrayList<>();
            try {
                for (int i = 0; i < Spinning.CPUS; i++) {
                    consumers.add(ShmQueue.open(dir, q.name()));
                    assertTrue(q.offer(new byte[] {1}), "a producer is not a consumer");
                }
                assertFalse(crowded.crowded(now += LATER), "attached, but none has taken");
                consumers.forEach(c -> assertNotNull(c.poll()));
                assertFalse(crowded.crowded(now), "not counted again within the interval");
                assertTrue(crowded.crowded(now += LATER));
            } finally {
                consumers.forEach(ShmQueue::close);
            }
            assertFalse(crowded.crowded(now + LATER), "consumers that left are not counted");
        }
    }

    @Test
    void aConsumerCountsAfreshEveryTakesPerCountTakes() {
        try (ShmQueue q = ShmQueue.create(dir, 4, 32); QueueFileView view = new QueueFileView(dir, q.name())) {
            CrowdedConsumers crowded = new CrowdedConsumers(table(view, q));
            List<ShmQueue> consumers = new ArrayList<>();
            try {
                for (int i = 0; i < Spinning.CPUS; i++) {
                    consumers.add(ShmQueue.open(dir, q.name()));
                    assertNull(consumers.getLast().poll());
                }
                for (int i = 1; i < CrowdedConsumers.TAKES_PER_COUNT; i++) {
                    assertFalse(crowded.crowdedAfterTake(), "the count taken at construction stands");
                }
                assertTrue(crowded.crowdedAfterTake());
            } finally {
                consumers.forEach(ShmQueue::close);
            }
        }
    }

    private static Participants table(QueueFileView view, ShmQueue q) {
        return new Participants(view.segment(), Geometry.read(view.segment(), view.segment().byteSize(), q.name()));
    }
}
