package io.refshare.inspect;

import io.refshare.share.ShareChildMain;
import io.refshare.channel.ChannelChildMain;
import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.Eventually;
import io.refshare.testing.Patterns;
import io.refshare.testing.PidNamespaces;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** The janitor with real processes: other PID namespaces, dead producers with messages queued. */
class JanitorAcceptanceTest {

    /**
     * A consumer in its own PID namespace (a container sharing /dev/shm): its pid means
     * nothing here, yet neither this process's sweep nor the one in a third process's
     * {@code Refshare.open} removes its files while it lives; after SIGKILL they go.
     */
    @Test
    void aConsumerInItsOwnPidNamespaceKeepsItsFilesWhileItLives() throws Exception {
        assumeTrue(PidNamespaces.available(), PidNamespaces.NEEDS);
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            List<String> consumerFiles;
            try (Refshare producer = Refshare.open(shm.config())) {
                try (ChildJvm consumer = ChildJvm.startUnder(PidNamespaces.OWN_NAMESPACE, new String[0],
                        ShareChildMain.class, "ConsumerMain", shm.path().toString())) {
                    try (Tensor t = producer.allocateBytes(4096)) {
                        Patterns.fill(t.data(), 7);
                        consumer.send("RECV 1 7 " + HexFormat.of().formatHex(producer.share(t)));
                    }
                    assertEquals("OK 1", consumer.read(), "the consumer holds the tensor");
                    consumerFiles = filesOfOthers(dir);
                    assertFalse(consumerFiles.isEmpty(), "its status file and life file: " + shm.files());
                    ProcessIdentity inside = ownerOf(dir, consumerFiles.getFirst());
                    assertNotEquals(consumer.pid(), inside.pid(), "the consumer records the pid of its own namespace");

                    Janitor.Report here = Janitor.sweep(dir, false);
                    assertEquals(List.of(), here.removed(), "nothing is dead: " + here.kept());
                    try (ChildJvm third = ChildJvm.start(InspectChildMain.class, "SweepingOpenMain", shm.path().toString())) {
                        assertEquals("OPENED", third.read());
                        assertEquals(0, third.waitFor());
                    }
                    assertTrue(shm.files().containsAll(consumerFiles), "both sweeps left the live consumer's files "
                            + consumerFiles + ": " + shm.files());
                    consumer.send("VERIFY 1 7");
                    assertEquals("OK 1", consumer.read(), "and it still reads its tensor");

                    consumer.kill();
                }
                // its status file goes at once; its life file once no file names it (the producer's
                // counter file lists it as a peer until the producer frees that entry or closes)
                List<String> statusFiles = consumerFiles.stream().filter(n -> n.contains("-proc-")).toList();
                assertEquals(1, statusFiles.size(), consumerFiles.toString());
                Eventually.await(() -> {
                    sweep(dir);
                    return !shm.files().contains(statusFiles.getFirst());
                }, "the killed consumer's status file is removed");
            }
            assertTrue(dir.leave(), "this process closed its refshare: nothing names it");
            Janitor.Report after = Janitor.sweep(dir, false);
            assertTrue(consumerFiles.stream().noneMatch(shm.files()::contains), "the killed consumer's files are gone: "
                    + shm.files() + ", kept " + after.kept());
        }
    }

    /**
     * A producer SIGKILLed with messages queued and a live consumer attached: its segment
     * and counter files stay while the queue holds messages naming them, so every message is
     * still received; they go once drained and released.
     */
    @Test
    void aDeadProducersFilesStayWhileALiveConsumerCanTakeItsQueuedMessages() throws Exception {
        int count = 20;
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            try (Refshare consumer = Refshare.open(shm.config())) {
                ShareQueue queue = consumer.createQueue(64);
                List<Tensor> received = new ArrayList<>();
                try {
                    ChildJvm producer = ChildJvm.start(ChannelChildMain.class, "QueueProducerMain", shm.path().toString(), queue.name(),
                            "1", Integer.toString(count));
                    try {
                        Eventually.await(() -> Internals.stats(queue).offered() == count, "the producer put every message");
                    } finally {
                        producer.kill();
                    }
                    List<String> producerFiles = filesOfOthers(dir).stream()
                            .filter(n -> n.contains("-seg-") || n.contains("-cnt-")).toList();
                    assertEquals(2, producerFiles.size(), "its segment and counter file: " + shm.files());

                    Janitor.Report whileQueued = Janitor.sweep(dir, false);
                    for (String f : producerFiles) {
                        assertTrue(whileQueued.kept().stream().anyMatch(k -> k.startsWith(f) && k.contains("queued in "
                                + queue.name())), f + " is kept for the queued messages: " + whileQueued.kept());
                    }
                    assertTrue(whileQueued.removed().stream().anyMatch(n -> n.contains("-proc-")),
                            "the dead producer's status file goes: " + whileQueued.removed());

                    for (int seq = 0; seq < count; seq++) {
                        Tensor t = queue.poll(5, TimeUnit.SECONDS);
                        assertNotNull(t, "message " + seq + " is still receivable");
                        received.add(t);
                        long id = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                        assertEquals(1L << 32 | seq, id);
                        assertEquals(-1, Patterns.firstMismatch(t.data().asSlice(8), id), "every byte of " + seq);
                    }
                    Janitor.Report drained = Janitor.sweep(dir, false);
                    String segment = producerFiles.stream().filter(n -> n.contains("-seg-")).findFirst().orElseThrow();
                    String counters = producerFiles.stream().filter(n -> n.contains("-cnt-")).findFirst().orElseThrow();
                    assertTrue(drained.removed().contains(segment), "drained: nothing queued names the segment any"
                            + " more (the consumer's mapping stays valid): " + drained.kept());
                    assertTrue(drained.kept().stream().anyMatch(k -> k.startsWith(counters) && k.contains("holder "
                            + ProcessHandle.current().pid())), "the counter file stays while we hold its tokens: "
                            + drained.kept());
                    for (Tensor t : received) {
                        assertEquals(-1, Patterns.firstMismatch(t.data().asSlice(8), t.data().get(
                                ValueLayout.JAVA_LONG_UNALIGNED, 0)), "the memory stays valid");
                        t.close();
                    }
                    received.clear();
                    Janitor.Report released = Janitor.sweep(dir, false);
                    assertTrue(released.removed().contains(counters), "released: " + released.kept());
                } finally {
                    received.forEach(Tensor::close);
                    queue.close();
                }
            }
            assertTrue(dir.leave(), "this process closed its refshare: nothing names it");
            Janitor.Report last = Janitor.sweep(dir, false);
            assertEquals(List.of(), shm.files(), "nothing left: " + last.kept());
        }
    }

    /** Concurrent sweeps: each removed file is counted by exactly one of them. */
    @Test
    void concurrentSweepsCountEachRemovalOnce() throws Exception {
        try (TempShm shm = new TempShm()) {
            ShmDirectory dir = shm.directory();
            for (int i = 0; i < 3; i++) {
                try (ChildJvm creator = ChildJvm.start(InspectChildMain.class, "CreateOnlyMain", shm.path().toString(), "4096")) {
                    creator.expect("CREATED");
                    creator.kill();
                }
            }
            int files = shm.files().size();
            assertEquals(6, files, "three dead creators' segments and life files: " + shm.files());
            List<Janitor.Report> reports = new ArrayList<>();
            List<Thread> sweepers = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                sweepers.add(Thread.ofPlatform().start(() -> {
                    Janitor.Report r = sweep(dir);
                    synchronized (reports) {
                        reports.add(r);
                    }
                }));
            }
            for (Thread t : sweepers) {
                t.join();
            }
            List<String> all = reports.stream().flatMap(r -> r.removed().stream()).sorted().toList();
            assertEquals(files, all.size(), "every file counted once: " + reports);
            assertEquals(all.stream().distinct().toList(), all, "no file counted twice: " + reports);
            assertEquals(List.of(), shm.files());
        }
    }

    private static Janitor.Report sweep(ShmDirectory dir) {
        try {
            return Janitor.sweep(dir, false);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Files of the directory that name another process than this one (as owner, or as a life file's process). */
    private static List<String> filesOfOthers(ShmDirectory dir) throws Exception {
        List<String> others = new ArrayList<>();
        try (var s = Files.list(dir.path())) {
            for (String name : s.map(p -> p.getFileName().toString()).sorted().toList()) {
                ProcessIdentity owner = ownerOf(dir, name);
                if (owner != null && !owner.equals(ProcessIdentity.current())) {
                    others.add(name);
                }
            }
        }
        return others;
    }

    private static ProcessIdentity ownerOf(ShmDirectory dir, String name) throws Exception {
        if (dir.kindOf(name) == ShmKind.LIFE) {
            return dir.lifeFileIdentity(name);
        }
        FileHeader h = FileHeader.readOrNull(dir, dir.path().resolve(name));
        return h == null ? null : h.owner();
    }
}
