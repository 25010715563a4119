package io.refshare.channel;

import io.refshare.shm.ShmDirectory;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/** Real processes: two producer JVMs and two consumer JVMs share one queue file. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ShmQueueMultiProcessTest {
    private static final int PRODUCERS = 2;
    private static final int CONSUMERS = 2;
    private static final int PER_PRODUCER = 50_000;

    @TempDir
    Path temp;
    @RegisterExtension
    final TempShm shm = new TempShm();
    private final ShmDirectory dir = shm.directory();

    @Test
    void everyMessageOfTwoProducerProcessesIsTakenExactlyOnceByTwoConsumerProcesses() throws Exception {
        List<ChildJvm> children = new ArrayList<>();
        try (ShmQueue q = ShmQueue.create(dir, 64, 64)) {
            List<Path> results = new ArrayList<>();
            for (int c = 0; c < CONSUMERS; c++) {
                Path result = temp.resolve("consumer-" + c + ".bin");
                results.add(result);
                children.add(QueueChild.start(shm.path(), "consume", q.name(), result.toString()));
            }
            for (int p = 0; p < PRODUCERS; p++) {
                children.add(QueueChild.start(shm.path(), "produce", q.name(), Integer.toString(p),
                        Integer.toString(PER_PRODUCER)));
            }
            for (int p = 0; p < PRODUCERS; p++) {
                assertEquals(0, children.get(CONSUMERS + p).waitFor(), "producer " + p + " failed (see its stderr)");
            }
            q.markClosed();
            for (int c = 0; c < CONSUMERS; c++) {
                assertEquals(0, children.get(c).waitFor(), "consumer " + c + " failed (see its stderr)");
            }

            int[][] taken = new int[PRODUCERS][PER_PRODUCER];
            int[] perConsumer = new int[CONSUMERS];
            for (int c = 0; c < CONSUMERS; c++) {
                try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(results.get(c))))) {
                    while (true) {
                        int producer;
                        try {
                            producer = in.readInt();
                        } catch (EOFException end) {
                            break;
                        }
                        taken[producer][(int) in.readLong()]++;
                        perConsumer[c]++;
                    }
                }
            }
            for (int p = 0; p < PRODUCERS; p++) {
                for (int s = 0; s < PER_PRODUCER; s++) {
                    assertEquals(1, taken[p][s], "message " + p + "/" + s + " taken " + taken[p][s] + " times");
                }
            }
            assertEquals(PRODUCERS * PER_PRODUCER, perConsumer[0] + perConsumer[1]);
            QueueStats stats = q.stats();
            assertEquals(PRODUCERS * PER_PRODUCER, stats.offered());
            assertEquals(PRODUCERS * PER_PRODUCER, stats.taken());
            assertEquals(1, stats.participants().size(), "the children detached");
        } finally {
            for (ChildJvm child : children) {
                child.close();
            }
        }
    }
}
