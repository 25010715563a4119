package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.tensor.DType;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A bridge whose take meets a resource limit keeps running: the message stays in the local
 * queue and is forwarded once the limit is no longer reached. Here the limit is the sender's
 * counter file of one peer entry, held by another reader (a second {@code Refshare} of this
 * process maps the file on its own and takes an entry of its own). Before 2026-11-28 the
 * bridge's {@code run()} ended with the {@code ResourceLimitException}.
 */
class SendingBridgeLimitTest {

    @Test
    void aBridgeWaitsOutAFullPeerTableAndForwardsTheMessage() throws Exception {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "rs-bridge-limit-");
        try {
            RefshareConfig config = RefshareConfig.defaults().withDirectory(dir);
            try (Refshare producer = Refshare.open(config.withPeersPerCounterFile(1));
                 Refshare bridgeSide = Refshare.open(config)) {
                ShareQueue q = producer.createQueue(4);
                ShareQueue in = bridgeSide.openQueue(q.name());
                Refshare reader = Refshare.open(config);
                Tensor held;
                try (Tensor t = producer.allocate(DType.INT64, 4)) {
                    t.data().set(ValueLayout.JAVA_LONG, 0, 42L);
                    held = reader.receive(producer.share(t)); // the file's one peer entry is the reader's
                    q.put(t);
                }
                List<Long> forwarded = new CopyOnWriteArrayList<>();
                SendingBridge bridge = new SendingBridge(in, new SendingBridge.Destination() {
                    @Override
                    public void put(Tensor t) {
                        forwarded.add(t.data().get(ValueLayout.JAVA_LONG, 0));
                    }

                    @Override
                    public void close(Duration timeout) {
                        // nothing to disconnect
                    }
                });
                CompletableFuture<Long> run = CompletableFuture.supplyAsync(() -> {
                    try {
                        return bridge.run();
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                });
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (bridge.limitsMet() == 0 && !run.isDone() && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertFalse(run.isDone(), "the bridge keeps running: " + run);
                assertTrue(bridge.limitsMet() > 0, "it met the full peer table");
                assertEquals(List.of(), forwarded);
                held.close();
                reader.close(); // leaves the file: its entry is free
                deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (forwarded.isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertEquals(List.of(42L), forwarded, "the message waited in the queue and was forwarded");
                assertEquals(0, in.rejected());
                q.endOfStream();
                assertEquals(1L, run.get(10, TimeUnit.SECONDS));
                in.close();
                q.close();
                assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(5)));
            }
        } finally {
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path f : files.sorted((a, b) -> b.compareTo(a)).toList()) {
                    Files.deleteIfExists(f);
                }
            }
        }
    }
}
