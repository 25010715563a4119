package io.refshare.channel;

import io.refshare.WaitStrategy;
import io.refshare.ShareQueue;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.Refshare;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.DataInputStream;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.BitSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * {@link WaitStrategy#BUSY_SPIN}: the same queue semantics as the default, only the waiting
 * differs (timeouts, the end of the stream, a close of the handle, messages from another process).
 */
class WaitStrategyTest {
    @TempDir
    Path tmp;

    @Test
    void aBusySpinningConsumerProcessTakesEveryMessageOnce() throws Exception {
        int count = 3_000;
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue queue = rs.createQueue(16, WaitStrategy.BUSY_SPIN)) {
            Path ids = tmp.resolve("ids");
            try (ChildJvm consumer = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", shm.path().toString(), queue.name(),
                    ids.toString(), "-", "-1", "BUSY_SPIN")) {
                consumer.expect("READY");
                for (long id = 0; id < count; id++) {
                    try (Tensor t = rs.allocate(DType.UINT8, 64)) {
                        t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                        Patterns.fill(t.data().asSlice(8), id);
                        queue.put(t); // a full queue: this producer busy-spins for room
                    }
                }
                queue.endOfStream();
                assertEquals(count + " 0 0 true", consumer.expect("DONE"));
                assertEquals(0, consumer.waitFor());
            }
            BitSet seen = new BitSet();
            try (DataInputStream in = new DataInputStream(Files.newInputStream(ids))) {
                for (int i = 0; i < count; i++) {
                    long id = in.readLong();
                    assertFalse(seen.get((int) id), "message " + id + " taken twice");
                    seen.set((int) id);
                }
            }
            assertEquals(count, seen.cardinality());
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
        }
    }

    @Test
    void timeoutsEndOfStreamAndCloseEndABusySpin() throws Exception {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue producer = rs.createQueue(1, WaitStrategy.BUSY_SPIN);
             ShareQueue consumer = rs.openQueue(producer.name(), WaitStrategy.BUSY_SPIN)) {
            long start = System.nanoTime();
            assertNull(consumer.poll(100, TimeUnit.MILLISECONDS));
            long waited = System.nanoTime() - start;
            assertTrue(waited >= TimeUnit.MILLISECONDS.toNanos(100) && waited < TimeUnit.SECONDS.toNanos(5), "" + waited);
            try (Tensor t = rs.allocate(DType.UINT8, 8)) {
                producer.put(t);
                assertFalse(producer.offer(t, 100, TimeUnit.MILLISECONDS), "full: the offer times out");
            }
            consumer.take().close();

            assertTakeEndsWhen(consumer, producer::endOfStream);
        }
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config());
             ShareQueue producer = rs.createQueue(1)) {
            ShareQueue consumer = rs.openQueue(producer.name(), WaitStrategy.BUSY_SPIN);
            assertTakeEndsWhen(consumer, consumer::close); // its own handle closed under it
        }
    }

    /** A take spinning on {@code consumer} ends with QueueClosedException once {@code ending} ran. */
    private static void assertTakeEndsWhen(ShareQueue consumer, Runnable ending) throws InterruptedException {
        CompletableFuture<Tensor> waiting = CompletableFuture.supplyAsync(() -> {
            try {
                return consumer.take();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        Thread.sleep(100);
        ending.run();
        ExecutionException ended = assertThrows(ExecutionException.class, () -> waiting.get(10, TimeUnit.SECONDS));
        assertInstanceOf(QueueClosedException.class, ended.getCause());
    }

    @Test
    void noStrategyIsRefusedBeforeAnythingIsCreated() {
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            assertThrows(NullPointerException.class, () -> rs.createQueue(4, null));
            assertEquals(0, shm.count("q"));
        }
    }
}
