package io.refshare.harness;


import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.zip.DataFormatException;

/**
 * Fan-out and fan-in on one queue: one producer (this JVM) streaming to 1, 2, 4 and 8 consumer
 * processes that compete for its messages, and 1, 2 and 4 producer processes streaming to one
 * consumer (this JVM). For each: the aggregate rate (messages over the time from the first
 * take anywhere to the last) and the one-way latency of the streamed messages (each carries
 * its producer's {@code System.nanoTime()} from just before {@code put}; CLOCK_MONOTONIC is one
 * clock for every process), which under a full stream is mostly time spent queued behind
 * others. Every message is a fresh tensor (pooled memory), only its stamp written.
 *
 * <p>Each point moves {@value #MESSAGES} messages, after every JVM compiled its path: each
 * consumer alone takes as many first, then all of them together twice as many (the paths
 * taken only under contention), each producer a share of as many, and then a whole round of
 * every point goes unmeasured. Every point is then run {@value #ROUNDS} times, round after
 * round, and the table gives its median. With fewer (an earlier version moved 40,000 a point
 * and warmed up with as many), the points timed the JIT compilers of nine JVMs on two cores:
 * a consumer that gets an eighth of the messages reaches its steady state eight times later,
 * so the curve fell with the number of consumers for that reason alone. The compilers are
 * not done even then: the C2 threads' share of a whole-machine {@code perf} profile taken
 * during each 8-consumer point was 15, 9, 27, 5 and 3% in five rounds after the unmeasured
 * one, and the point's rate followed it (0.67, 0.58, 0.50, 0.78 and 0.79 M tensors/s). The
 * longest compilations are of two periodic chores that reach C2 about a minute into each
 * JVM's life (the queue's recovery sweep and the counter files' dead-peer check, 200 to 300 ms
 * each from start to end in every consumer); the median of five rounds leaves such rounds out.
 */
final class ScalingBench {
    /** Where a message carries its stamp. */
    static final ValueLayout.OfLong STAMP = ValueLayout.JAVA_LONG_UNALIGNED;
    static final int[] CONSUMERS = {1, 2, 4, 8};
    static final int[] PRODUCERS = {1, 2, 4};
    /** The queue's capacity unless {@code --window} gives another. */
    private static final int DEFAULT_CAPACITY = 64;
    /** Messages per point, and per process to warm up: a few seconds at one consumer. */
    private static final long MESSAGES = 1_000_000;
    /**
     * Rounds of every point; the table gives each point's median round. On a small shared
     * machine one point of one round swung by a fifth either way between runs, and a round
     * the compilers disturb is an outlier the median leaves out.
     */
    private static final int ROUNDS = 5;

    /**
     * One point of a curve: {@code producers} -> {@code consumers} at {@code size}, with what the
     * curve's single process (the producer of fan-out, the consumer of fan-in: this JVM) spent on
     * its thread: CPU nanoseconds per message, the system's share of them, and the share of the
     * point's time the thread was on a CPU at all.
     */
    record Point(long size, int producers, int consumers, long messages, double tensorsPerSecond, double p50Micros,
                 double p99Micros, Cpu single) {
    }

    /** A thread's CPU time over a stretch of wall-clock time, from {@link ThreadMXBean}. */
    record Cpu(long nanos, long cpuNanos, long userNanos) {
        private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

        /** This thread's CPU so far, to be ended by {@link #since}. */
        static Cpu now() {
            return new Cpu(System.nanoTime(), THREADS.getCurrentThreadCpuTime(), THREADS.getCurrentThreadUserTime());
        }

        /** This thread's CPU from {@code start} to now. */
        static Cpu since(Cpu start) {
            Cpu end = now();
            return new Cpu(end.nanos - start.nanos, end.cpuNanos - start.cpuNanos, end.userNanos - start.userNanos);
        }

        double nanosPer(long messages) {
            return (double) cpuNanos / Math.max(1, messages);
        }

        double systemShare() {
            return cpuNanos <= 0 ? 0 : (double) (cpuNanos - userNanos) / cpuNanos;
        }

        double onCpuShare() {
            return nanos <= 0 ? 0 : (double) cpuNanos / nanos;
        }
    }

    private final Refshare rs;
    private final List<PeerProcess> peers;
    private final int capacity;
    private final PrintStream log;

    private ScalingBench(Refshare rs, List<PeerProcess> peers, int capacity, PrintStream log) {
        this.rs = rs;
        this.peers = peers;
        this.capacity = capacity;
        this.log = log;
    }

    /**
     * Runs both curves at every size of {@code settings}; returns the table, and with {@code out}
     * writes it to scaling.txt there with one chart per curve and size.
     */
    static String run(Settings settings, Path out, PrintStream log) throws Exception {
        List<PeerProcess> peers = new ArrayList<>();
        try (Refshare rs = Refshare.open(settings.config())) {
            for (int i = 0; i < CONSUMERS[CONSUMERS.length - 1]; i++) {
                peers.add(PeerProcess.start(settings.directory(), settings.prefix()));
            }
            int capacity = settings.window() > 0 ? settings.window() : DEFAULT_CAPACITY;
            ScalingBench bench = new ScalingBench(rs, peers, capacity, log);
            StringBuilder table = new StringBuilder(header(capacity));
            for (long size : settings.sizes()) {
                // unmeasured first: every JVM compiles its consuming and its producing path, each
                // consumer alone (shared among eight, a warm-up leaves each an eighth)
                for (PeerProcess peer : peers) {
                    bench.fanOut(size, List.of(peer), MESSAGES);
                }
                // then all together, so the paths taken only under contention (claims lost, sleeps,
                // wake-ups) are compiled before the points time them
                bench.fanOut(size, peers, 2 * MESSAGES);
                bench.fanIn(size, PRODUCERS[PRODUCERS.length - 1], MESSAGES); // as many from each producer
                log.printf(Locale.ROOT, "  %s, a round unmeasured%n", ByteSize.label(size));
                bench.round(size, new ArrayList<>(), new ArrayList<>());
                List<List<Point>> fanOutRounds = new ArrayList<>();
                List<List<Point>> fanInRounds = new ArrayList<>();
                for (int round = 1; round <= ROUNDS; round++) {
                    log.printf(Locale.ROOT, "  %s, round %d of %d%n", ByteSize.label(size), round, ROUNDS);
                    bench.round(size, fanOutRounds, fanInRounds);
                }
                List<Point> fanOut = medians(fanOutRounds);
                List<Point> fanIn = medians(fanInRounds);
                table.append(rows("fan-out", fanOut)).append(rows("fan-in", fanIn));
                if (out != null) {
                    // the numbers first, after every size: a chart that cannot be drawn loses none of them
                    Files.writeString(out.resolve("scaling.txt"), table);
                    String label = ByteSize.label(size);
                    ChartFile.write(out.resolve("fan-out-" + label.replace(" ", "") + ".svg"), file -> chart(file,
                            "1 producer -> N consumers, " + label, "consumer processes", fanOut, false), log);
                    ChartFile.write(out.resolve("fan-in-" + label.replace(" ", "") + ".svg"), file -> chart(file,
                            "N producers -> 1 consumer, " + label, "producer processes", fanIn, true), log);
                }
            }
            return table.toString();
        } finally {
            for (PeerProcess p : peers) {
                p.finish(log);
                p.close();
            }
        }
    }

    /** Every point of both curves once, each curve's points added to its list of rounds. */
    private void round(long size, List<List<Point>> fanOutRounds, List<List<Point>> fanInRounds) throws Exception {
        List<Point> fanOut = new ArrayList<>();
        for (int c : CONSUMERS) {
            fanOut.add(fanOut(size, peers.subList(0, c), MESSAGES));
        }
        fanOutRounds.add(fanOut);
        List<Point> fanIn = new ArrayList<>();
        for (int p : PRODUCERS) {
            fanIn.add(fanIn(size, p, MESSAGES / p));
        }
        fanInRounds.add(fanIn);
    }

    /** This JVM puts {@code messages} to {@code consumers} peers draining one queue. */
    private Point fanOut(long size, List<PeerProcess> consumers, long messages) throws Exception {
        List<String> results = new ArrayList<>();
        Cpu producer;
        try (ShareQueue queue = rs.createQueue(capacity)) {
            for (PeerProcess consumer : consumers) {
                consumer.send(BenchPeer.RS_DRAIN, queue.name());
            }
            for (PeerProcess consumer : consumers) {
                consumer.await(BenchPeer.READY);
            }
            Cpu start = Cpu.now();
            for (long m = 0; m < messages; m++) {
                try (Tensor t = rs.allocateBytes(size)) {
                    t.data().set(STAMP, 0, System.nanoTime());
                    queue.put(t);
                }
            }
            producer = Cpu.since(start);
            queue.endOfStream();
            for (PeerProcess consumer : consumers) {
                results.add(consumer.await(BenchPeer.RESULT));
            }
        }
        long count = 0;
        long first = Long.MAX_VALUE;
        long last = Long.MIN_VALUE;
        Histogram latency = new Histogram(3);
        for (String r : results) {
            String[] w = r.split(" ");
            long n = Long.parseLong(w[0]);
            count += n;
            if (n > 0) {
                first = Math.min(first, Long.parseLong(w[1]));
                last = Math.max(last, Long.parseLong(w[2]));
            }
            latency.add(decode(w[3]));
        }
        if (count != messages) {
            throw new IOException("fan-out to " + consumers.size() + ": " + count + " of " + messages + " messages taken");
        }
        return logged(point(size, 1, consumers.size(), count, last - first, latency, producer), "producer");
    }

    /** {@code producers} peers put {@code perProducer} messages each; this JVM takes them all. */
    private Point fanIn(long size, int producers, long perProducer) throws Exception {
        long total = perProducer * producers;
        Histogram latency = new Histogram(3);
        Cpu consumer;
        long first = 0;
        long last = 0;
        try (ShareQueue queue = rs.createQueue(capacity)) {
            for (int i = 0; i < producers; i++) {
                peers.get(i).send(BenchPeer.RS_PRODUCE, queue.name(), Long.toString(size), Long.toString(perProducer));
            }
            for (int i = 0; i < producers; i++) {
                peers.get(i).await(BenchPeer.READY);
            }
            for (int i = 0; i < producers; i++) {
                peers.get(i).send("GO");
            }
            Cpu start = Cpu.now();
            for (long m = 0; m < total; m++) {
                try (Tensor t = queue.take()) {
                    last = System.nanoTime();
                    latency.recordValue(Math.max(0, last - t.data().get(STAMP, 0)));
                }
                if (m == 0) {
                    first = last;
                }
            }
            consumer = Cpu.since(start);
            for (int i = 0; i < producers; i++) {
                peers.get(i).await("PUT");
            }
        }
        return logged(point(size, producers, 1, total, last - first, latency, consumer), "consumer");
    }

    /** Point by point, the round with the median rate (its latencies with it). */
    private static List<Point> medians(List<List<Point>> rounds) {
        List<Point> medians = new ArrayList<>();
        for (int i = 0; i < rounds.getFirst().size(); i++) {
            int at = i;
            List<Point> runs = new ArrayList<>(rounds.stream().map(r -> r.get(at)).toList());
            runs.sort(Comparator.comparingDouble(Point::tensorsPerSecond));
            medians.add(runs.get(runs.size() / 2));
        }
        return medians;
    }

    private static Point point(long size, int producers, int consumers, long count, long nanos, Histogram latency,
                               Cpu single) {
        return new Point(size, producers, consumers, count, (count - 1) * 1e9 / Math.max(1, nanos),
                latency.getValueAtPercentile(50) / 1e3, latency.getValueAtPercentile(99) / 1e3, single);
    }

    /** A histogram as one word of a reply line: its compressed encoding in Base64. */
    static String encode(Histogram h) {
        ByteBuffer b = ByteBuffer.allocate(h.getNeededByteBufferCapacity());
        h.encodeIntoCompressedByteBuffer(b);
        return Base64.getEncoder().encodeToString(Arrays.copyOf(b.array(), b.position()));
    }

    static Histogram decode(String word) throws IOException {
        try {
            return Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(Base64.getDecoder().decode(word)), 0);
        } catch (DataFormatException | IllegalArgumentException e) {
            throw new IOException("a consumer's latency histogram does not decode: " + e.getMessage(), e);
        }
    }

    /** Logs {@code p}, whose single process is the {@code single} ("producer" or "consumer"). */
    private Point logged(Point p, String single) {
        log.printf(Locale.ROOT, "  %s: %d -> %d: %,.0f tensors/s, p50 %.1f us; the %s's thread %.2f us of CPU a message%n",
                ByteSize.label(p.size()), p.producers(), p.consumers(), p.tensorsPerSecond(), p.p50Micros(), single,
                p.single().nanosPer(p.messages()) / 1e3);
        return p;
    }

    private static String header(int capacity) {
        MachineInfo m = MachineInfo.detect();
        return String.format(Locale.ROOT, "refshare bench --scaling, %s UTC: %s, %d cores, %s; JDK %s; load %s at the "
                        + "start%nqueue capacity %d, a fresh pooled tensor per message (only its stamp written); each point the median of %d rounds%n"
                        + "single side: the thread of the curve's one process (fan-out: the producer; fan-in: the consumer),"
                        + " its CPU time per message, the system's%nshare of it, and the share of the point's time it was on a CPU%n"
                        + "%-9s %-8s %9s %9s %12s %10s %10s %14s %17s %7s %7s%n", java.time.ZonedDateTime.now(java.time.ZoneOffset.UTC)
                        .withNano(0).toLocalDateTime(), m.cpu(), m.cores(), m.memory(), m.jdk(), MachineInfo.loadAverage(),
                capacity, ROUNDS, "size", "curve", "producers", "consumers", "tensors/s", "p50 us", "p99 us", "vs 1 process",
                "single: us CPU/msg", "system", "on CPU");
    }

    private static String rows(String curve, List<Point> points) {
        StringBuilder s = new StringBuilder();
        double one = points.getFirst().tensorsPerSecond();
        for (Point p : points) {
            s.append(String.format(Locale.ROOT, "%-9s %-8s %9d %9d %,12.0f %10.1f %10.1f %13.2fx %17.2f %6.0f%% %6.0f%%%n",
                    ByteSize.label(p.size()), curve, p.producers(), p.consumers(), p.tensorsPerSecond(), p.p50Micros(),
                    p.p99Micros(), p.tensorsPerSecond() / one, p.single().nanosPer(p.messages()) / 1e3,
                    100 * p.single().systemShare(), 100 * p.single().onCpuShare()));
        }
        return s.toString();
    }

    /**
     * One curve's chart: aggregate tensors/s on the left axis, the streamed messages' p50 one-way
     * latency on the right, and on fan-out charts the floor the small-message issue set, 0.8 times
     * the one-consumer rate.
     */
    private static void chart(Path file, String title, String xTitle, List<Point> points, boolean byProducers)
            throws IOException {
        SvgChart chart = new SvgChart(title + ": aggregate tensors/s and p50", 800, 500,
                SvgChart.Axis.linear(xTitle, v -> String.format(Locale.ROOT, "%.0f", v)).withTicksAtData(),
                SvgChart.Axis.linear("tensors/s", v -> String.format(Locale.ROOT, "%,.0f", v)),
                SvgChart.Axis.linear("p50 one-way latency (us)", v -> String.format(Locale.ROOT, "%,.1f", v)));
        double[] x = points.stream().mapToDouble(p -> byProducers ? p.producers() : p.consumers()).toArray();
        double[] rate = points.stream().mapToDouble(Point::tensorsPerSecond).toArray();
        double[] p50 = points.stream().mapToDouble(Point::p50Micros).toArray();
        chart.add(new SvgChart.Series("aggregate tensors/s", x, rate, false, SvgChart.Mark.CIRCLE, false));
        if (!byProducers) {
            double floor = 0.8 * rate[0];
            chart.add(new SvgChart.Series("0.8 x one consumer's rate (target)", new double[] {x[0], x[x.length - 1]},
                    new double[] {floor, floor}, false, SvgChart.Mark.NONE, true));
        }
        chart.add(new SvgChart.Series("p50 one-way latency (right axis)", x, p50, true, SvgChart.Mark.DIAMOND, false));
        chart.writeTo(file);
    }
}
