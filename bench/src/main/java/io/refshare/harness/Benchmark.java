package io.refshare.harness;


import io.refshare.Refshare;
import io.refshare.WaitStrategy;
import io.refshare.inspect.Inventory;

import java.io.IOException;
import java.io.PrintStream;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * One benchmark run: this process is the producer, one child JVM the consumer, and every
 * system is measured between those two processes, size by size, so the copy baseline and
 * refshare see the same machine in the same minute; refshare's reclamation latency is measured
 * between them too. Afterwards it checks that the run
 * left nothing behind: no consumer process, no limbo, no files.
 */
final class Benchmark {
    private static final int CLOCK_PROBES = 50;
    private static final long WARMUP_MAX_BYTES = 64 << 10;
    private static final int PING_PONG_SLICES = 10;

    private final Settings settings;
    private final PrintStream log;
    private final List<Measurement> measurements = new ArrayList<>();
    private final List<Reclamation> reclamations = new ArrayList<>();

    private Benchmark(Settings settings, PrintStream log) {
        this.settings = settings;
        this.log = log;
    }

    /** Runs everything {@code settings} asks for, printing progress to {@code log}. */
    static BenchResults run(Settings settings, PrintStream log) throws IOException, InterruptedException {
        return new Benchmark(settings, log).run();
    }

    private BenchResults run() throws IOException, InterruptedException {
        ZonedDateTime date = ZonedDateTime.now(ZoneOffset.UTC);
        long started = System.nanoTime();
        MachineInfo machine = MachineInfo.detect();
        String loadBefore = MachineInfo.loadAverage();
        MachineInfo.CpuTimes cpuBefore = MachineInfo.CpuTimes.read();
        Set<String> before = ourFiles();
        List<SizePlan> plans = settings.sizes().stream().map(settings::plan).toList();
        ClockCheck clock;
        long consumerPid;
        int consumerExit;
        boolean limboEmpty;
        PythonBench.Outcome python;
        Refshare rs = Refshare.open(settings.config());
        try {
            try (PeerProcess peer = PeerProcess.start(settings.directory(), settings.prefix())) {
                consumerPid = peer.pid();
                log.printf(Locale.ROOT, "producer pid %d, consumer pid %d%n", ProcessHandle.current().pid(), consumerPid);
                try (SocketBench socket = SocketBench.connect(peer); AgronaBench agrona = startAgrona(plans)) {
                    clock = ClockCheck.probe(peer, CLOCK_PROBES);
                    RefshareBench refshare = new RefshareBench(rs, peer);
                    // compiling the hot paths does not need large payloads: a run of 256 MiB only would
                    // otherwise fill 256 MiB tens of thousands of times before measuring anything
                    warmUp(refshare, socket, Math.min(Collections.min(settings.sizes()), WARMUP_MAX_BYTES));
                    warmUp(agrona, plans);
                    for (SizePlan plan : plans) {
                        measure(refshare, socket, agrona, plan);
                        rs.trim(); // give this size's pooled memory back before the next one
                    }
                }
                // the Python rows need the consumer JVM too: it consumes what the Python process produces
                python = settings.python() ? PythonBench.run(rs, peer, settings, plans, log)
                        : new PythonBench.Outcome(List.of(), "--no-python given", 0, 0);
                measurements.addAll(python.measurements());
                consumerExit = peer.finish(log);
            }
            limboEmpty = rs.awaitLimboEmpty(Duration.ofSeconds(10));
        } finally {
            rs.close();
        }
        String torch;
        if (settings.torch()) {
            TorchBench.Outcome outcome = TorchBench.run(plans, log);
            measurements.addAll(outcome.measurements());
            torch = outcome.skipped();
        } else {
            torch = "--no-torch given";
        }
        Set<Long> pids = new HashSet<>(Set.of(ProcessHandle.current().pid(), consumerPid));
        if (python.pid() != 0) {
            pids.add(python.pid());
        }
        List<String> left = leftBehind(before, pids);
        return new BenchResults(date, machine, loadBefore, MachineInfo.loadAverage(),
                cpuBefore.stolenUntil(MachineInfo.CpuTimes.read()), settings,
                ProcessHandle.current().pid(), consumerPid, clock, plans, List.copyOf(measurements),
                List.copyOf(reclamations), torch, python.skipped(),
                new BenchResults.Cleanup(consumerExit, python.exit(), limboEmpty, left), System.nanoTime() - started);
    }

    /**
     * Runs every kind of exchange, unmeasured, pass after pass for {@link Settings#warmupSeconds}, so
     * that both JVMs have compiled their hot paths before anything is measured.
     */
    private void warmUp(RefshareBench refshare, SocketBench socket, long size) throws IOException, InterruptedException {
        int rounds = settings.warmup();
        if (rounds == 0) {
            return;
        }
        log.printf(Locale.ROOT, "warming up both JVMs for %d s: passes of %,d ping-pong rounds and %,d streamed "
                + "messages of %s per kind%n", settings.warmupSeconds(), rounds, 5L * rounds, ByteSize.label(size));
        repeatForTheWarmUp(() -> {
            for (Mode mode : Mode.values()) {
                refshare.pingPong(size, mode, 0, rounds);
                refshare.stream(size, mode, 1, 5 * rounds, 64);
            }
            refshare.streamBatches(size, Measurement.BATCH_SIZE, false, 1, 5 * rounds, 64);
            if (size <= Measurement.DIFFERENT_UP_TO) {
                refshare.streamBatches(size, Measurement.BATCH_SIZE, true, 1, 5 * rounds, 64);
            }
            RefshareBench spinning = refshare.waitingWith(WaitStrategy.BUSY_SPIN);
            spinning.pingPong(size, Mode.REUSE, 0, rounds);
            spinning.stream(size, Mode.REUSE, 1, 5 * rounds, 64);
            socket.pingPong(size, 0, rounds);
            socket.stream(size, 1, 5 * rounds);
        });
    }

    /** Runs {@code pass}, then again until {@link Settings#warmupSeconds} have passed since the first. */
    private void repeatForTheWarmUp(PeerWork pass) throws IOException, InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(settings.warmupSeconds());
        do {
            pass.run();
        } while (System.nanoTime() - until < 0);
    }

    private void measure(RefshareBench refshare, SocketBench socket, AgronaBench agrona, SizePlan p)
            throws IOException, InterruptedException {
        log.printf(Locale.ROOT, "%s: ping-pong %,d rounds (+%,d warm-up), streaming %,d messages (+%,d warm-up)%s, "
                        + "window %d, reclamation %,d + %,d rounds%n", ByteSize.label(p.size()), p.pingPongRounds(),
                p.pingPongWarmup(), p.streamMessages(), p.streamWarmup(),
                p.streamSlices() == 1 ? "" : " in " + p.streamSlices() + " interleaved slices", p.window(),
                p.reclaimRounds(), p.reclaimHeldRounds());
        List<StreamRow> streams = new ArrayList<>();
        for (Mode mode : Mode.values()) {
            LatencyStats latency = refshare.pingPong(p.size(), mode, p.pingPongWarmup(), p.pingPongRounds());
            streams.add(new StreamRow(Measurement.REFSHARE + mode.label(), false, latency,
                    (warmup, messages) -> refshare.stream(p.size(), mode, warmup, messages, p.window())));
            if (mode == Mode.REUSE) {
                streams.add(new StreamRow(Measurement.BATCHES + Measurement.BATCH_SIZE, false, latency,
                        (warmup, messages) -> refshare.streamBatches(p.size(), Measurement.BATCH_SIZE, false, warmup,
                                messages, p.window())));
                if (p.size() <= Measurement.DIFFERENT_UP_TO) {
                    streams.add(new StreamRow(Measurement.DIFFERENT_BATCHES, false, latency,
                            (warmup, messages) -> refshare.streamBatches(p.size(), Measurement.BATCH_SIZE, true,
                                    warmup, messages, p.window())));
                }
            }
        }
        RefshareBench spinning = refshare.waitingWith(WaitStrategy.BUSY_SPIN);
        boolean ring = agrona != null && AgronaBench.fits(p.size());
        BusySpinPingPongs pingPongs = ring ? interleaved(spinning, agrona, p) : new BusySpinPingPongs(
                spinning.pingPong(p.size(), Mode.REUSE, p.pingPongWarmup(), p.pingPongRounds()), null);
        streams.add(new StreamRow(Measurement.BUSY_SPIN + Mode.REUSE.label(), false, pingPongs.refshare(),
                (warmup, messages) -> spinning.stream(p.size(), Mode.REUSE, warmup, messages, p.window())));
        if (ring) {
            streams.add(new StreamRow(AgronaBench.SYSTEM, false, pingPongs.ring(),
                    (warmup, messages) -> agrona.stream(p.size(), warmup, messages)));
        }
        streams.add(new StreamRow(Measurement.SOCKET, true, socket.pingPong(p.size(), p.pingPongWarmup(),
                p.pingPongRounds()), (warmup, messages) -> socket.stream(p.size(), warmup, messages)));
        inTurns(streams, p).forEach(this::add);
        add(refshare.reclaim(p.size(), Reclamation.AT_ONCE_NANOS, Math.max(3, p.reclaimRounds() / 10),
                p.reclaimRounds()));
        add(refshare.reclaim(p.size(), Reclamation.HELD_NANOS, Math.max(1, p.reclaimHeldRounds() / 10),
                p.reclaimHeldRounds()));
    }

    /** One system's row at one size: its ping-pong, measured already, and how to stream a slice of it. */
    private record StreamRow(String system, boolean baseline, LatencyStats latency, StreamSlice slice) {
    }

    /** Streams {@code messages} timed messages after {@code warmup} untimed ones. */
    private interface StreamSlice {
        ThroughputStats run(int warmup, int messages) throws IOException, InterruptedException;
    }

    /** The Agrona ring's own pair of JVMs, or null when no size of the run fits its ring. */
    private AgronaBench startAgrona(List<SizePlan> plans) throws IOException, InterruptedException {
        return plans.stream().anyMatch(p -> AgronaBench.fits(p.size())) ? AgronaBench.start(settings.directory()) : null;
    }

    /** Warms the ring's pair up as long as refshare's, at the smallest size it takes. */
    private void warmUp(AgronaBench agrona, List<SizePlan> plans) throws IOException, InterruptedException {
        int rounds = settings.warmup();
        if (agrona == null || rounds == 0) {
            return;
        }
        long size = plans.stream().mapToLong(SizePlan::size).filter(AgronaBench::fits).min().orElseThrow();
        repeatForTheWarmUp(() -> {
            agrona.pingPong(size, 0, rounds);
            agrona.stream(size, 1, 5 * rounds);
        });
    }

    /** The two busy-spin ping-pongs of one size, measured together ({@code ring} null without the ring). */
    private record BusySpinPingPongs(LatencyStats refshare, LatencyStats ring) {
    }

    /**
     * refshare's busy-spin ping-pong and the Agrona ring's, in {@value #PING_PONG_SLICES} alternating
     * slices of the plan's rounds (each slice with its share of the warm-up rounds), so that both see
     * the machine in the same state. Measured minutes apart they did not: a VM can switch, every few
     * seconds to minutes, between states in which a cache line moves between two of its CPUs in
     * about 100 ns and in about 400 ns (the 2-core VM of the README's runs, whichever CPUs the two
     * processes were pinned to), and two rows taken apart compared one state with the other
     * (0.8× to 6.9× there).
     */
    private BusySpinPingPongs interleaved(RefshareBench spinning, AgronaBench agrona, SizePlan p)
            throws IOException, InterruptedException {
        int slices = Math.min(PING_PONG_SLICES, p.pingPongRounds());
        int warmup = Math.max(1, p.pingPongWarmup() / slices);
        List<LatencyStats> refshare = new ArrayList<>();
        List<LatencyStats> ring = new ArrayList<>();
        for (int i = 0; i < slices; i++) {
            int rounds = p.pingPongRounds() / slices + (i < p.pingPongRounds() % slices ? 1 : 0);
            refshare.add(spinning.pingPong(p.size(), Mode.REUSE, warmup, rounds));
            ring.add(agrona.pingPong(p.size(), warmup, rounds));
        }
        return new BusySpinPingPongs(LatencyStats.concat(refshare), LatencyStats.concat(ring));
    }

    /**
     * Every stream of one size, in rounds of slices ({@link SizePlan#streamSlices}), so that the rows
     * whose ratios the targets read, refshare's against the socket copy's, see the machine in the same
     * states, as the busy-spin ping-pongs do. Measured one after the other they did not: in the 2-core
     * VM's runs the socket copy streamed at about 0.72 or 1.0 M messages a second and refshare's
     * batches at about 3.5 or 5.4 M, each switching on its own, so a row's ratio depended on which
     * pair of states it met.
     */
    private List<Measurement> inTurns(List<StreamRow> streams, SizePlan p) throws IOException, InterruptedException {
        List<List<ThroughputStats>> parts = new ArrayList<>();
        streams.forEach(s -> parts.add(new ArrayList<>()));
        for (int i = 0; i < p.streamSlices(); i++) {
            for (int k = 0; k < streams.size(); k++) {
                parts.get(k).add(streams.get(k).slice().run(p.sliceWarmup(), p.sliceMessages(i)));
            }
        }
        List<Measurement> rows = new ArrayList<>();
        for (int k = 0; k < streams.size(); k++) {
            StreamRow s = streams.get(k);
            rows.add(new Measurement(p.size(), s.system(), s.baseline(), s.latency(),
                    ThroughputStats.concat(parts.get(k))));
        }
        return rows;
    }

    private void add(Reclamation r) {
        reclamations.add(r);
        log.printf(Locale.ROOT, "  reclamation, held %-6s p50 %8.1f us  p99 %8.1f us  (%d rounds%s)%n", r.holdLabel(),
                r.micros(0.5), r.micros(0.99), r.rounds(), r.excluded() == 0 ? "" : ", " + r.excluded() + " excluded");
    }

    private void add(Measurement m) {
        measurements.add(m);
        log.printf(Locale.ROOT, "  %-18s p50 %10.1f us   %,12.0f tensors/s%n", m.system(),
                m.latency().oneWayMicros(0.5), m.throughput().tensorsPerSecond());
    }

    private Set<String> ourFiles() throws IOException {
        Set<String> names = new HashSet<>();
        Inventory.list(ShmOptions.directory(settings.config())).forEach(e -> names.add(e.name()));
        return names;
    }

    /**
     * refshare files that appeared during the run and belong to one of its two processes
     * (others may be creating files in the same directory meanwhile: theirs are not ours to report).
     */
    private List<String> leftBehind(Set<String> before, Set<Long> pids) throws IOException {
        return Inventory.list(ShmOptions.directory(settings.config())).stream()
                .filter(e -> !before.contains(e.name()) && e.owner() != null && pids.contains(e.owner().pid()))
                .map(Inventory.Entry::name).sorted().toList();
    }
}
