package io.refshare.fuzz;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.exceptions.InvalidDataException;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.channel.ShmQueue;
import io.refshare.channel.ShmQueueLayout;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The queue file is shared with every process that opens it, so anything in it may have
 * been written by a hostile one: its header and geometry (checked when the file is
 * opened: the transport's handshake), and the framing of its cells (checked on every
 * poll). Refusals are {@link InvalidDataException} (or another {@link RefshareException}
 * with a reason); the queue must never crash, hang, or hand out a frame longer than its
 * cells, and after rejecting a bad frame it keeps serving.
 */
class ShmQueueFuzzTest {
    /** Participant entries of the queues these tests create: small files, quick sweeps. */
    private static final int PARTICIPANTS = 2;
    private static final long CELLS_OFFSET = ShmQueueLayout.HEADER_LENGTH
            + (long) PARTICIPANTS * ShmQueueLayout.PARTICIPANT_LENGTH;

    private static TempShm shm;
    private static ShmDirectory dir;

    @BeforeAll
    static void createDirectory() {
        shm = new TempShm();
        dir = shm.directory();
    }

    @AfterAll
    static void removeDirectory() {
        shm.close();
    }

    /**
     * A whole queue file of the fuzzer's making (the corpus starts from real ones): opening
     * it either refuses it or gives a queue on which every operation answers.
     */
    @FuzzTest(maxDuration = "2m")
    void openFile(byte[] file) throws InterruptedException {
        String name = Hostile.plant(dir, ShmKind.QUEUE, file);
        try {
            ShmQueue q;
            try {
                q = ShmQueue.open(dir, name);
            } catch (RefshareException e) {
                Hostile.refused(e);
                return;
            }
            try (q) {
                exercise(q);
            }
            try {
                ShmQueue.inspect(dir, name);
            } catch (RefshareException e) {
                Hostile.refused(e);
            }
        } finally {
            Hostile.delete(dir.path().resolve(name));
        }
    }

    /**
     * A real queue with messages in it, then a hostile process writes into the file. With
     * only length fields changed, every message comes out exactly once, intact or rejected
     * for its impossible length, and the queue serves on; with any other bytes changed
     * (cell words, head, tail, participants, counters) it must still answer every call.
     */
    @FuzzTest(maxDuration = "2m")
    void hostileWrites(FuzzedDataProvider data) throws InterruptedException {
        int capacity = data.consumeInt(1, 8);
        int maxMessage = data.consumeInt(1, 96);
        int cellLength = ShmQueueLayout.cellLength(maxMessage);
        try (ShmQueue q = ShmQueue.create(dir, capacity, maxMessage, PARTICIPANTS)) {
            Path file = dir.path().resolve(q.name());
            long fileLength = CELLS_OFFSET + (long) capacity * cellLength;
            List<byte[]> sent = new ArrayList<>();
            int published = data.consumeInt(0, capacity);
            for (int i = 0; i < published; i++) {
                byte[] m = new byte[data.consumeInt(0, maxMessage)];
                Arrays.fill(m, (byte) (i + 1));
                assertTrue(q.offer(m), "room for message " + i);
                sent.add(m);
            }
            boolean lengthsOnly = data.consumeBoolean();
            Map<Integer, Integer> lengths = new HashMap<>(); // cell -> the length written last
            int writes = data.consumeInt(0, 4);
            for (int w = 0; w < writes; w++) {
                if (lengthsOnly) {
                    int cell = data.consumeInt(0, capacity - 1);
                    int length = data.consumeInt();
                    Hostile.poke(file, CELLS_OFFSET + (long) cell * cellLength + ShmQueueLayout.CELL_LENGTH_FIELD,
                            le(length));
                    lengths.put(cell, length);
                } else {
                    long at = data.consumeLong(0, fileLength - 1);
                    byte[] bytes = data.consumeBytes((int) Math.min(24, fileLength - at));
                    Hostile.poke(file, at, bytes);
                }
            }

            if (lengthsOnly) {
                int rejected = 0;
                List<byte[]> taken = new ArrayList<>();
                for (int i = 0; i < capacity + 1; i++) {
                    try {
                        byte[] m = q.poll();
                        if (m == null) {
                            break;
                        }
                        assertTrue(m.length <= maxMessage, m.length + "-byte frame handed out");
                        taken.add(m);
                    } catch (InvalidDataException e) {
                        Hostile.refused(e);
                        rejected++;
                    }
                }
                int expectRejected = 0;
                for (int i = 0, t = 0; i < published; i++) {
                    Integer written = lengths.get(i);
                    if (written != null && (written < 0 || written > maxMessage)) {
                        expectRejected++;
                        continue;
                    }
                    byte[] m = taken.get(t++);
                    if (written == null) {
                        assertArrayEquals(sent.get(i), m, "message " + i + " intact");
                    } else {
                        assertEquals((int) written, m.length, "message " + i + " has the length its cell says");
                    }
                }
                assertEquals(expectRejected, rejected, "frames rejected");
                assertEquals(published - expectRejected, taken.size(), "frames delivered");
                assertEquals(rejected, q.stats().rejected(), "rejections counted");
                byte[] probe = Arrays.copyOf(new byte[] {42, 43}, Math.min(2, maxMessage));
                assertTrue(q.offer(probe), "still takes messages");
                assertArrayEquals(probe, q.poll(), "still delivers them");
                assertNull(q.poll());
            } else {
                exercise(q);
            }
        }
    }

    /** Every operation of a queue whose file may hold anything: answers or clean refusals only. */
    private static void exercise(ShmQueue q) throws InterruptedException {
        int max = q.maxMessageBytes();
        assertNotNull(q.stats());
        for (int i = 0; i < Math.min(q.capacity(), 64) + 1; i++) {
            try {
                byte[] m = q.poll();
                if (m == null) {
                    break;
                }
                assertTrue(m.length <= max, m.length + "-byte frame handed out by a queue of " + max + "-byte cells");
            } catch (InvalidDataException | QueueClosedException e) {
                Hostile.refused(e);
            }
        }
        try {
            byte[] m = new byte[Math.min(max, 7)];
            if (q.offer(m, 0, java.util.concurrent.TimeUnit.NANOSECONDS)) {
                q.poll(0, java.util.concurrent.TimeUnit.NANOSECONDS);
            }
        } catch (InvalidDataException | QueueClosedException e) {
            Hostile.refused(e);
        }
        q.recover();
        if (!q.isClosed()) {
            try {
                q.drain(m -> assertTrue(m.length <= max, m.length + "-byte frame drained"));
            } catch (InvalidDataException e) {
                Hostile.refused(e); // cell words overwritten: refused, not walked for ever
            }
        }
        // (no drain after closing: it rightly waits for an offer a live process claimed, and
        // the file may name a live process as the claimant of any cell)
        q.markClosed();
        try {
            byte[] m = q.poll();
            assertTrue(m == null || m.length <= max, "frame handed out after closing");
        } catch (InvalidDataException | QueueClosedException e) {
            Hostile.refused(e);
        }
        assertNotNull(q.stats());
    }

    private static byte[] le(int value) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array();
    }
}
