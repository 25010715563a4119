package io.refshare.cli;

import io.refshare.harness.ShmOptions;
import io.refshare.harness.PythonPeers;
import io.refshare.harness.ChildJvms;
import io.refshare.harness.ByteSize;
import io.refshare.tensor.Device;
import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.inspect.Inventory;
import io.refshare.shm.ShmDirectory;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * {@code refshare demo}: this process produces tensors into a queue, consumer processes
 * take them, verify every byte and close them; live progress while it runs, and a
 * summary that checks nothing leaked.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Share tensors zero-copy from this process to consumer processes, live.",
                "",
                "This process produces tensors and puts them on a refshare queue; consumer processes take them "
                        + "zero-copy. Shows live progress and ends with a summary that checks every byte was verified "
                        + "and nothing leaked. Run 'refshare inspect' in another terminal to watch the files. Consumers "
                        + "are JVMs, Python processes (--python-consumers: numpy, and torch when /usr/bin/python3 can "
                        + "import it), or both."})
final class DemoCommand implements Callable<Integer> {
    private static final String JAVA = "java";
    private static final String PYTHON = "python-";

    @Mixin
    ShmOptions shm;

    @Option(names = {"-c", "--consumers"}, paramLabel = "N",
            description = "Java consumer processes (default: 2, or 0 with --python-consumers)")
    Integer javaConsumers;

    @Option(names = {"-p", "--python-consumers"}, paramLabel = "N", defaultValue = "0",
            description = "Python consumer processes (python/peers/demo_consumer.py on /usr/bin/python3; they "
                    + "alternate numpy and torch views when torch imports) (default: ${DEFAULT-VALUE})")
    int pythonConsumers;

    @Option(names = {"-s", "--size"}, paramLabel = "SIZE", defaultValue = "256KiB", converter = ByteSize.class,
            description = "bytes per tensor, e.g. 4KiB, 1MiB (default: ${DEFAULT-VALUE})")
    long size;

    @Option(names = {"-d", "--duration"}, paramLabel = "SECONDS", defaultValue = "12",
            description = "how long to stream (default: ${DEFAULT-VALUE})")
    double seconds;

    @Option(names = {"-q", "--queue-capacity"}, paramLabel = "N", defaultValue = "64",
            description = "messages the queue holds before put waits (default: ${DEFAULT-VALUE})")
    int capacity;

    @Option(names = "--device", paramLabel = "DEVICE", defaultValue = "host",
            description = "where the tensors live: host (shared memory) or cuda[:N] (CUDA device memory shared"
                    + " through CUDA IPC; needs the NVIDIA driver) (default: ${DEFAULT-VALUE})")
    String deviceName;

    @Override
    public Integer call() throws Exception {
        int java = javaConsumers != null ? javaConsumers : pythonConsumers > 0 ? 0 : 2;
        int consumers = java + pythonConsumers;
        if (java < 0 || pythonConsumers < 0 || consumers < 1 || consumers > 64) {
            throw new IllegalArgumentException("--consumers and --python-consumers must add up to between 1 and 64, were "
                    + java + " and " + pythonConsumers);
        }
        if (size < 8 || seconds <= 0 || capacity < 1) {
            throw new IllegalArgumentException("--size must be at least 8 bytes, --duration and --queue-capacity positive");
        }
        Device device = Device.parse(deviceName);
        List<String> kinds = consumerKinds(java, pythonConsumers, device);
        var config = device.isHost() ? shm.config() : shm.config().withCudaDevice(device.index());
        if (!device.isHost()) {
            // fail before anything starts: no driver or no device is a plain one-line error
            try (Refshare probe = Refshare.open(config)) {
                System.out.println("device " + probe.cuda());
            }
        }
        ShmDirectory shmDir = ShmOptions.directory(config);
        Set<String> before = LeftBehind.refshareFiles(shmDir);
        System.out.printf(Locale.ROOT, "refshare demo: 1 producer (pid %d) -> %d consumer processes%s, %s tensors, "
                + "%.0f s, files in %s%n", ProcessHandle.current().pid(), consumers,
                pythonConsumers == 0 ? "" : " (" + java + " Java, " + pythonConsumers + " Python)",
                Inventory.bytes(size), seconds, config.directory());

        List<Process> children = new ArrayList<>();
        AtomicLongArray progress = new AtomicLongArray(consumers * 3); // received, bytes, bad per consumer
        long[] done = new long[consumers * 3];
        long sent = 0;
        long started;
        long streamed;
        Refshare rs = Refshare.open(config);
        // device tensors are written through a host buffer: the host cannot address device memory
        MemorySegment staging = device.isHost() ? null : Arena.ofAuto().allocate(size);
        try {
            try (ShareQueue queue = rs.createQueue(capacity)) {
                List<Thread> readers = new ArrayList<>();
                CountDownLatch ready = new CountDownLatch(consumers);
                for (int i = 0; i < consumers; i++) {
                    String kind = kinds.get(i);
                    Process p = kind.equals(JAVA)
                            ? ChildJvms.start(DemoConsumer.class, "128m", config.directory().toString(),
                                    config.prefix(), queue.name(), device.toString())
                            : PythonPeers.start("demo_consumer.py", config.directory().toString(), config.prefix(),
                                    queue.name(), kind.substring(PYTHON.length()));
                    children.add(p);
                    readers.add(readReports(i, p, progress, done, ready));
                }
                List<String> names = new ArrayList<>();
                for (int i = 0; i < consumers; i++) {
                    names.add(children.get(i).pid() + " (" + kinds.get(i) + ")");
                }
                System.out.println("queue " + queue.name() + "; consumers " + String.join(", ", names));
                // streaming starts once every consumer is attached: a Python interpreter takes a while to import torch
                while (!ready.await(100, TimeUnit.MILLISECONDS)) {
                    ChildJvms.requireAlive(children, "consumer");
                }
                started = System.nanoTime();
                long end = started + (long) (seconds * 1e9);
                long nextReport = started + 500_000_000L;
                while (System.nanoTime() < end) {
                    try (Tensor t = rs.allocate(device, DType.UINT8, size)) {
                        if (device.isHost()) {
                            DemoPattern.fill(t.data(), sent);
                        } else {
                            DemoPattern.fill(staging, sent);
                            rs.cuda().copyFromHost(staging, t);
                        }
                        while (!queue.offer(t, 100, TimeUnit.MILLISECONDS)) {
                            ChildJvms.requireAlive(children, "consumer");
                        }
                    } // dropped at once: the block waits in the limbo until its consumer closes it
                    sent++;
                    if (System.nanoTime() >= nextReport) {
                        report(rs, sent, progress, consumers, System.nanoTime() - started);
                        nextReport += 500_000_000L;
                    }
                }
                streamed = System.nanoTime() - started;
                queue.endOfStream();
                System.out.println();
                for (Process p : children) {
                    if (!p.waitFor(60, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("consumer " + p.pid() + " did not finish within 60 s");
                    }
                }
                for (Thread r : readers) {
                    r.join();
                }
                for (Process p : children) {
                    if (p.exitValue() != 0) {
                        throw new IllegalStateException("consumer " + p.pid() + " failed with exit code " + p.exitValue());
                    }
                }
            }
            boolean limboEmpty = rs.awaitLimboEmpty(Duration.ofSeconds(10));
            var stats = rs.stats();
            var allocator = device.isHost() ? stats.allocator() : rs.cuda().stats().allocator();
            long received = 0;
            long bytes = 0;
            long bad = 0;
            for (int i = 0; i < consumers; i++) {
                received += done[3 * i];
                bytes += done[3 * i + 1];
                bad += done[3 * i + 2];
            }
            rs.close();
            Set<Long> demoPids = new HashSet<>();
            demoPids.add(ProcessHandle.current().pid());
            children.forEach(p -> demoPids.add(p.pid()));
            Set<String> left = LeftBehind.ownedBy(shmDir, before, LeftBehind.refshareFiles(shmDir), demoPids);
            double secs = streamed / 1e9;
            System.out.println("summary");
            System.out.printf(Locale.ROOT, "  sent %,d tensors of %s in %.1f s: %,.0f tensors/s, %s/s shared zero-copy%n",
                    sent, Inventory.bytes(size), secs, sent / secs, Inventory.bytes((long) (sent * size / secs)));
            System.out.printf(Locale.ROOT, "  received %,d tensors (%s) by %d consumers; every byte verified: %s%n",
                    received, Inventory.bytes(bytes), consumers,
                    bad == 0 && received == sent ? "all correct" : bad + " corrupt, " + (sent - received) + " missing");
            if (pythonConsumers > 0) {
                List<String> each = new ArrayList<>();
                for (int i = 0; i < consumers; i++) {
                    each.add(String.format(Locale.ROOT, "%s %,d", kinds.get(i), done[3 * i]));
                }
                System.out.println("  by consumer: " + String.join(", ", each));
            }
            System.out.printf(Locale.ROOT, "  producer memory: %d segments reused for %,d tensors, limbo %s, "
                    + "blocks in use %d%n", allocator.segmentCreations(), sent,
                    limboEmpty ? "empty" : stats.limboBlocks() + " blocks", allocator.blocksInUse());
            System.out.println("  files left behind: " + (left.isEmpty() ? "none" : left));
            boolean ok = bad == 0 && received == sent && limboEmpty && left.isEmpty()
                    && allocator.blocksInUse() == 0;
            System.out.println(ok ? "OK: every tensor delivered once and verified, all counts returned, nothing leaked"
                    : "FAILED: see above");
            return ok ? 0 : 1;
        } finally {
            ChildJvms.end(children, Duration.ZERO); // consumers ignore stdin: after a failure they are killed at once
            rs.close();
        }
    }

    private static void report(Refshare rs, long sent, AtomicLongArray progress, int consumers, long elapsedNanos) {
        long received = 0;
        long bytes = 0;
        for (int i = 0; i < consumers; i++) {
            received += progress.get(3 * i);
            bytes += progress.get(3 * i + 1);
        }
        var s = rs.stats();
        double secs = elapsedNanos / 1e9;
        String line = String.format(Locale.ROOT, "%5.1f s  sent %,9d  received %,9d  %,8.0f tensors/s  %9s/s  "
                        + "limbo %4d blocks (%s)  live counts %,d", secs, sent, received, received / secs,
                Inventory.bytes((long) (bytes / secs)), s.limboBlocks(), Inventory.bytes(s.limboBytes()),
                rs.liveCounts());
        if (System.console() != null) {
            System.out.print("\r" + line);
        } else {
            System.out.println(line);
        }
        System.out.flush();
    }

    /**
     * What each consumer runs: {@value #JAVA}, or {@value #PYTHON} and the array library it
     * verifies through (numpy; every other one torch when {@code /usr/bin/python3} imports it).
     */
    private static List<String> consumerKinds(int java, int python, Device device) throws InterruptedException {
        List<String> kinds = new ArrayList<>();
        for (int i = 0; i < java; i++) {
            kinds.add(JAVA);
        }
        if (python == 0) {
            return kinds;
        }
        if (!device.isHost()) {
            throw new IllegalArgumentException("--python-consumers share host memory only, not --device " + device);
        }
        String missing = PythonPeers.unavailable("numpy");
        if (missing != null) {
            throw new IllegalArgumentException("--python-consumers: " + missing
                    + " (the README's section From Python has the set-up line)");
        }
        boolean torch = PythonPeers.hasTorch();
        for (int i = 0; i < python; i++) {
            kinds.add(PYTHON + (torch && i % 2 == 1 ? "torch" : "numpy"));
        }
        return kinds;
    }

    private static Thread readReports(int index, Process p, AtomicLongArray progress, long[] done,
                                      CountDownLatch ready) {
        return Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                String line;
                while ((line = r.readLine()) != null) {
                    String[] w = line.split(" ");
                    if (w[0].equals("READY")) {
                        ready.countDown();
                    }
                    if ((w[0].equals("PROGRESS") || w[0].equals("DONE")) && w.length == 4) {
                        for (int k = 0; k < 3; k++) {
                            progress.set(3 * index + k, Long.parseLong(w[k + 1]));
                            if (w[0].equals("DONE")) {
                                done[3 * index + k] = Long.parseLong(w[k + 1]);
                            }
                        }
                    }
                }
            } catch (IOException ignored) {
                // the consumer is gone; its exit code tells
            }
        });
    }
}
