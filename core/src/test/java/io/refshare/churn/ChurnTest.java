package io.refshare.churn;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.counter.CounterFile;
import io.refshare.inspect.Janitor;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Churn: one producer serves many successive consumer processes, far more
 * than its counter files have peer entries, mixing clean exits and SIGKILLs, and each
 * consumer's place is taken by a new process (a restart). Every message is taken exactly
 * once with every byte verified, nothing is rejected, and at the end no count is live, the
 * limbo is empty, every peer entry is free and no file is left.
 *
 * <p>Consumers run {@value #LANES_DEFAULT} at a time by default. Each takes
 * {@value #MESSAGES_PER_CONSUMER} messages; by its number it then
 * <ul>
 * <li>is SIGKILLed holding its last two (the producer must reclaim them),</li>
 * <li>closes refshare with its last two still open (close gives them back), or</li>
 * <li>closes everything and exits.</li>
 * </ul>
 * Counter files have {@value #PEERS} peer entries and {@value #SLOTS} slots, so files rotate
 * and every file sees several times more consumers than it has entries.
 *
 * <p>Two ways to hand messages over: through a {@link ShareQueue} that consumers join and
 * leave (a consumer's close ends nothing; the acceptance run, {@value #CONSUMERS_DEFAULT}
 * consumers in CI), and directly, each message given to one consumer on its stdin (a fifth
 * as many). The longer run ({@code scripts/churn-long.sh}) sets
 * {@code -Drefshare.churn.consumers=5000}.
 */
class ChurnTest {
    static final int CONSUMERS_DEFAULT = 300;
    static final int LANES_DEFAULT = 4;
    static final int MESSAGES_PER_CONSUMER = 4;
    static final int PEERS = 8;
    static final int SLOTS = 64;
    private static final String[] CHILD_JVM = {"-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"};

    @RegisterExtension
    final TempShm shm = new TempShm();

    private final int consumers = Integer.getInteger("refshare.churn.consumers", CONSUMERS_DEFAULT);
    private final int lanes = Integer.getInteger("refshare.churn.lanes", LANES_DEFAULT);
    private final Map<Long, AtomicInteger> taken = new ConcurrentHashMap<>();
    private final Set<ChildJvm> running = ConcurrentHashMap.newKeySet();
    private final AtomicInteger nextMessage = new AtomicInteger();
    private final AtomicLong retries = new AtomicLong();
    private final AtomicInteger killedHolding = new AtomicInteger();

    private interface Consumer {
        void serve(int number) throws Exception;
    }

    @Test
    void consumersJoinAndLeaveAQueueOfOneProducer() throws Exception {
        long started = System.nanoTime();
        int total = consumers * MESSAGES_PER_CONSUMER;
        try (Refshare producer = Refshare.open(config())) {
            try (ShareQueue queue = producer.createQueue(32)) {
                ExecutorService putter = Executors.newSingleThreadExecutor();
                try {
                    Future<?> puts = putter.submit(() -> {
                        for (long id = 0; id < total; id++) {
                            try (Tensor t = producer.allocateBytes(8 + 1024 + (id % 16) * 4096)) {
                                t.data().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, id);
                                Patterns.fill(t.data().asSlice(8), id);
                                queue.put(t); // waits while the queue is full, also while no consumer is attached
                            }
                        }
                        return null;
                    });
                    runLanes(n -> serveFromQueue(n, queue.name()));
                    puts.get(10, TimeUnit.SECONDS);
                } finally {
                    putter.shutdownNow();
                }
                assertEquals(0, queue.rejected(), "nothing rejected");
            }
            checkTheEnd(producer, total, started, "queue");
        }
        sweepAndCheckNothingLeft();
    }

    @Test
    void consumersComeAndGoForDirectHandOffs() throws Exception {
        long started = System.nanoTime();
        int direct = Math.max(1, consumers / 5);
        try (Refshare producer = Refshare.open(config())) {
            runLanes(direct, n -> serveDirectly(n, producer));
            checkTheEnd(producer, direct * MESSAGES_PER_CONSUMER, started, "direct");
        }
        sweepAndCheckNothingLeft();
    }

    private RefshareConfig config() {
        return shm.config().withPeersPerCounterFile(PEERS).withSlotsPerCounterFile(SLOTS);
    }

    private void runLanes(Consumer consumer) throws Exception {
        runLanes(consumers, consumer);
    }

    private void runLanes(int count, Consumer consumer) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(lanes);
        try {
            List<Future<?>> work = new ArrayList<>();
            for (int lane = 0; lane < lanes; lane++) {
                int first = lane;
                work.add(pool.submit((Callable<Void>) () -> {
                    for (int c = first; c < count; c += lanes) {
                        consumer.serve(c);
                    }
                    return null;
                }));
            }
            long budget = Math.max(600, count * 3L);
            for (Future<?> f : work) {
                try {
                    f.get(budget, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    fail("the churn did not finish within " + budget + " s");
                }
            }
        } finally {
            running.forEach(ChildJvm::kill);
            pool.shutdownNow();
        }
    }

    /** A consumer attaches to the queue, takes its messages, and is killed, closes or exits. */
    private void serveFromQueue(int number, String queueName) {
        ChildJvm child = start(ChurnChildMain.class, "QueueChurnConsumerMain", shm.path().toString(), queueName);
        try {
            child.expect("READY");
            int ending = number % 3;
            child.send("TAKE " + MESSAGES_PER_CONSUMER + " " + (ending != 2 ? 1 : 0));
            for (int m = 0; m < MESSAGES_PER_CONSUMER; m++) {
                String[] got = child.read().split(" ", 3);
                assertEquals("GOT", got[0], "consumer " + number + ": " + String.join(" ", got));
                took(Long.parseLong(got[1]), Long.parseLong(got[2]));
            }
            assertEquals("DONE", child.read());
            end(child, ending);
        } finally {
            stop(child);
        }
    }

    /** A consumer gets each message on its stdin, and is killed, closes or exits. */
    private void serveDirectly(int number, Refshare producer) {
        ChildJvm child = start(ChurnChildMain.class, "ChurnConsumerMain", shm.path().toString());
        try {
            child.expect("READY");
            int ending = number % 3;
            for (int m = 0; m < MESSAGES_PER_CONSUMER; m++) {
                int id = nextMessage.getAndIncrement();
                boolean keep = ending != 2 && m >= MESSAGES_PER_CONSUMER - 2;
                byte[] message;
                try (Tensor t = producer.allocateBytes(1024 + (id % 16) * 4096L)) {
                    Patterns.fill(t.data(), id);
                    message = producer.share(t);
                } // the producer drops it at once: the block waits in the limbo for the consumer
                child.send("MSG " + id + " " + id + " " + (keep ? 1 : 0) + " " + HexFormat.of().formatHex(message));
                String[] answer = child.read().split(" ", 3);
                assertEquals("TOOK", answer[0], "consumer " + number + ": " + String.join(" ", answer));
                assertEquals(Integer.toString(id), answer[1]);
                took(id, Long.parseLong(answer[2]));
            }
            end(child, ending);
        } finally {
            stop(child);
        }
    }

    private ChildJvm start(Class<?> main, String... args) {
        ChildJvm child = ChildJvm.startWith(CHILD_JVM, main, args);
        running.add(child);
        return child;
    }

    private void stop(ChildJvm child) {
        child.kill();
        running.remove(child);
    }

    private void took(long id, long retriesForIt) {
        retries.addAndGet(retriesForIt);
        taken.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
    }

    private void end(ChildJvm child, int ending) {
        if (ending == 0) {
            child.kill(); // SIGKILL holding two messages
            killedHolding.incrementAndGet();
        } else {
            child.send("EXIT");
            assertEquals("BYE", child.read());
            assertEquals(0, child.waitFor());
        }
    }

    private void checkTheEnd(Refshare producer, int total, long started, String how) throws Exception {
        assertEquals(total, taken.size(), "every message was taken");
        taken.forEach((id, n) -> assertEquals(1, n.get(), "message " + id + " taken exactly once"));
        assertTrue(producer.awaitLimboEmpty(Duration.ofSeconds(30)), () -> "the limbo empties: "
                + producer.stats().limboBlocks() + " blocks left; holders now: " + holdersNow(shm.directory()));
        assertEquals(0, Internals.sharing(producer).liveCounts(), "no count is live");
        // the collector counts a reclamation just after releasing the tokens: the limbo may empty in between
        long expected = 2L * killedHolding.get();
        Eventually.await(() -> producer.stats().reclaimed() >= expected, "the reclamations are counted");
        assertEquals(expected, producer.stats().reclaimed(),
                "exactly the references the killed consumers held were reclaimed");
        Eventually.await(() -> peerEntriesInUse(shm.directory()) == 0, "every peer entry is free (left or reclaimed)");
        System.out.printf("churn (%s): %d consumers (%d killed holding 2 messages), %d messages, %d take/receive"
                        + " retries for a full peer table, counter files of %d peers and %d slots, %.1f s%n", how,
                taken.size() / MESSAGES_PER_CONSUMER, killedHolding.get(), total, retries.get(), PEERS, SLOTS,
                (System.nanoTime() - started) / 1e9);
    }

    private void sweepAndCheckNothingLeft() throws IOException {
        Janitor.sweep(shm.directory(), false); // the killed consumers' status and life files
        assertEquals(List.of(), shm.files(), "no file left");
    }

    /** The processes holding tokens of the producer's counter files, with the verdict on each. */
    private static String holdersNow(ShmDirectory dir) {
        List<String> holders = new ArrayList<>();
        try (Stream<Path> names = Files.list(dir.path())) {
            for (String name : names.map(p -> p.getFileName().toString()).toList()) {
                if (dir.kindOf(name) == ShmKind.COUNTERS) {
                    try (CounterFile f = CounterFile.open(dir, name)) {
                        f.currentHolders().forEach(h -> holders.add(h + " " + dir.verdict(h) + " in " + name));
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            holders.add("(cannot tell: " + e + ")");
        }
        return holders.toString();
    }

    /** Peer entries in use across the producer's counter files, as any process can read them. */
    private static int peerEntriesInUse(ShmDirectory dir) {
        int used = 0;
        try (Stream<Path> names = Files.list(dir.path())) {
            for (String name : names.map(p -> p.getFileName().toString()).toList()) {
                if (dir.kindOf(name) == ShmKind.COUNTERS) {
                    try (CounterFile f = CounterFile.open(dir, name)) {
                        used += f.peersInUse();
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return used;
    }
}
