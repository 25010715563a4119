package io.refshare.harness;


import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/** The human table and the raw results.json of a run. */
final class Report {
    private static final DateTimeFormatter DATE = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss 'UTC'", Locale.ROOT);

    private Report() {
    }

    static String table(BenchResults r) {
        StringBuilder s = new StringBuilder();
        MachineInfo m = r.machine();
        line(s, "refshare bench, %s", DATE.format(r.date()));
        line(s, "machine     %s, %d cores, %s memory; %s; JDK %s", m.cpu(), m.cores(), m.memory(), m.kernel(), m.jdk());
        line(s, "load        %s at the start, %s at the end (1/5/15-minute averages; other work skews every number)",
                r.loadBefore(), r.loadAfter());
        line(s, "stolen      %s of the CPUs' time during the run (a virtual machine's host running something else while",
                r.stolen());
        line(s, "            its CPUs had work: it stops either process at random moments)");
        line(s, "processes   producer pid %d (this JVM), consumer pid %d (a child JVM: same java, same class path)",
                r.producerPid(), r.consumerPid());
        ClockCheck c = r.clock();
        line(s, "clock       System.nanoTime() reads CLOCK_MONOTONIC on Linux: one clock for every process, so the two");
        line(s, "            JVMs' timestamps subtract. Checked here: %d/%d probes of the consumer's clock fell inside",
                c.inside(), c.probes());
        line(s, "            the producer's request-reply window (median %.0f us), and %,d of %,d ping-pong rounds had",
                c.medianWindowNanos() / 1e3, r.clockSamples() - r.clockViolations(), r.clockSamples());
        line(s, "            the consumer's read inside their round trip%s", r.clockHolds() ? "."
                : ". THE CHECK FAILED: latencies below are half round trips instead.");
        line(s, "latency     one way, ping-pong with one message in flight: producer's clock just before put (socket:");
        line(s, "            write) -> consumer's clock once it has the message and has read its first and last element");
        line(s, "            and 64 bytes. p50/p90/p99 in microseconds.");
        String socketWindow = r.measurements().stream().filter(Measurement::baseline).findFirst()
                .map(x -> x.throughput().window()).orElse("its kernel buffers");
        line(s, "throughput  streaming through a bounded window, timed by the consumer (refshare: queue capacity,");
        line(s, "            64 messages, up to 1 MiB of small ones, at most 1 GiB, unless --window says; socket: %s).",
                socketWindow);
        line(s, "            GB/s = 10^9 bytes made readable per second: refshare maps the producer's memory, the");
        line(s, "            socket copies every byte.");
        line(s, "warm-up     before anything is measured, every kind ran unmeasured for %d s (the Agrona ring's JVMs",
                r.settings().warmupSeconds());
        line(s, "            too), so the compilers had finished; each row also streams a tenth of its messages first.");
        line(s, "slices      the streams of one size take turns, in up to %d slices of %,d messages or more (each",
                SizePlan.STREAM_SLICES, SizePlan.MESSAGES_PER_SLICE);
        line(s, "            after its share of that tenth), so the rows compared see the machine in the same states.");
        s.append('\n');
        String header = String.format(Locale.ROOT, "%-9s %-34s %9s %9s %9s %12s %10s %12s %12s", "size", "system",
                "p50 us", "p90 us", "p99 us", "tensors/s", "GB/s", "p50 vs copy", "tput vs copy");
        s.append(header).append('\n').append("-".repeat(header.length())).append('\n');
        long lastSize = -1;
        for (long size : r.settings().sizes()) {
            if (lastSize != -1) {
                s.append('\n');
            }
            lastSize = size;
            Measurement base = r.baseline(size);
            for (Measurement x : r.measurements()) {
                if (x.size() != size) {
                    continue;
                }
                line(s, "%-9s %-34s %9s %9s %9s %12s %10s %12s %12s", (Object[]) cells(r, x, base));
            }
        }
        s.append('\n');
        line(s, "vs copy: times better than the Unix-socket copy at the same size in this run (latency: copy p50 / p50;");
        line(s, "  throughput: tensors/s / copy tensors/s).");
        line(s, "refshare reuse: one pre-filled tensor put again and again (the transport alone).");
        line(s, "refshare fresh: a newly allocated and filled tensor for every message, closed by the producer right");
        line(s, "  after put (the fill is outside the latency, inside the throughput).");
        line(s, "refshare reuse, batches of 32: streaming as reuse, the producer putting 32 at a time (putAll) and the");
        line(s, "  consumer taking one, then draining up to 31 (drainTo); its latency is reuse's: one hand-off is not batched");
        line(s, "  (its batch is 32 references to the one tensor).");
        line(s, "refshare batches of 32 different: as the row above with 32 different pre-filled tensors in each batch,");
        line(s, "  each a block of its own, as a real batch mostly is (sizes up to 1 MiB).");
        line(s, "refshare busy-spin reuse: as reuse, both processes' queue handles with WaitStrategy.BUSY_SPIN (they");
        line(s, "  never yield or sleep while waiting: for processes with a CPU of their own; this machine has %d cores).",
                r.machine().cores());
        line(s, "agrona ring copy (busy-spin): the payload copied into an Agrona one-to-one ring buffer in a shared file");
        line(s, "  (agrona 2.4.1) and read in place by the peer JVM, both spinning: the physical limit of a hand-off");
        line(s, "  here (no reference counting, no pooled memory; sizes up to 1 MiB). Its ping-pong and refshare");
        line(s, "  busy-spin's run in 10 alternating slices, so that both see the machine in the same state.");
        line(s, "unix socket copy: the payload written to a Unix domain socket, read in full by the consumer before it");
        line(s, "  reads; ping-pong answered with one byte (refshare's answer is an 8-byte tensor on a second queue).");
        if (r.python() != null) {
            line(s, "java->python, python->java: not measured (%s)", r.python());
        } else {
            line(s, "refshare java->python numpy: this JVM produces as above, a Python process (python/peers/bench_peer.py,");
            line(s, "  /usr/bin/python3) consumes: it reads the same bytes through a zero-copy numpy array.");
            line(s, "refshare python->java: the Python process produces (fills through numpy), the consumer JVM reads.");
        }
        if (r.torch() != null) {
            line(s, "torch.multiprocessing: skipped (%s)", r.torch());
        } else {
            line(s, "torch.multiprocessing: torch's own processes (python3), each measurement between a fresh pair,");
            line(s, "  timed with time.monotonic_ns(), the same CLOCK_MONOTONIC.");
        }
        sharedCpuLines(s, r);
        reclamationTable(s, r);
        s.append('\n');
        line(s, "targets, checked against this run:");
        for (Targets t : Targets.of(r)) {
            line(s, "  %-6s  %-78s %s", t.verdict(), t.name(), t.measured());
        }
        s.append('\n');
        BenchResults.Cleanup cl = r.cleanup();
        line(s, "cleanup: consumer process exited with code %d%s; limbo %s; files left in %s: %s; socket file removed",
                cl.consumerExit(), r.python() == null ? ", Python process with code " + cl.pythonExit() : "",
                cl.limboEmpty() ? "empty" : "NOT EMPTY", r.settings().directory(),
                cl.filesLeft().isEmpty() ? "none" : String.join(", ", cl.filesLeft()));
        line(s, "run took %.0f s", r.elapsedNanos() / 1e9);
        return s.toString();
    }

    /**
     * Per refshare ping-pong and streaming row, how often the two measuring threads were found on
     * one CPU ({@link SharedCpu}). The batch rows share reuse's ping-pong, listed once.
     */
    private static void sharedCpuLines(StringBuilder s, BenchResults r) {
        List<Measurement> pingPongs = new ArrayList<>();
        Set<LatencyStats> listed = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Measurement x : r.measurements()) {
            if (x.latency().sharedCpu().samples() > 0 && listed.add(x.latency())) {
                pingPongs.add(x);
            }
        }
        List<Measurement> streams = r.measurements().stream().filter(x -> x.throughput().sharedCpu().samples() > 0)
                .toList();
        if (pingPongs.isEmpty() && streams.isEmpty()) {
            return;
        }
        s.append('\n');
        line(s, "one CPU: while each refshare ping-pong ran and each refshare row streamed, how often the producer's");
        line(s, "  and the consumer's measuring threads were found on one CPU (the CPU each last ran on, every %d ms),",
                SharedCpu.INTERVAL_MILLIS);
        line(s, "  and how often both were runnable there, one waiting for the other. On a machine with few CPUs");
        line(s, "  the default strategy's sleeps can bring the two onto one CPU while the other idles, and a hand-off");
        line(s, "  then takes a yield and a switch of threads: a high share hints that the row measured the");
        line(s, "  scheduler's placement too. A coarse view: hiccups shorter than the interval go unseen.");
        for (Measurement x : pingPongs) {
            line(s, "  %-9s %-44s %s", ByteSize.label(x.size()), x.system() + ", ping-pong", x.latency().sharedCpu().label());
        }
        for (Measurement x : streams) {
            line(s, "  %-9s %-44s %s", ByteSize.label(x.size()), x.system() + ", streaming",
                    x.throughput().sharedCpu().label());
        }
    }

    private static void reclamationTable(StringBuilder s, BenchResults r) {
        if (r.reclamations().isEmpty()) {
            return;
        }
        s.append('\n');
        line(s, "reclamation latency (refshare): from the consumer's close of the last reference to a block the");
        line(s, "  producer had dropped, to that block being back in the producer's allocator (limbo empty). The");
        line(s, "  producer only watches (it never collects itself): this is its background collector's work. The");
        line(s, "  consumer reads each fresh tensor and holds it %s (closing at once) or %s (at work) first.",
                holdLabel(Reclamation.AT_ONCE_NANOS), holdLabel(Reclamation.HELD_NANOS));
        line(s, "  Target: p99 <= 1 ms.");
        String header = String.format(Locale.ROOT, "%-9s %-14s %8s %9s %9s %9s %9s %12s", "size", "consumer holds",
                "rounds", "p50 us", "p90 us", "p99 us", "max us", "p99 <= 1 ms");
        s.append(header).append('\n').append("-".repeat(header.length())).append('\n');
        for (Reclamation x : r.reclamations()) {
            line(s, "%-9s %-14s %,8d %9s %9s %9s %9s %12s", ByteSize.label(x.size()), x.holdLabel(), x.rounds(),
                    micros(x.micros(0.5)), micros(x.micros(0.9)), micros(x.micros(0.99)), micros(x.micros(1)),
                    x.meetsTarget() ? "yes" : "NO");
        }
        long excluded = r.reclamations().stream().mapToLong(Reclamation::excluded).sum();
        if (excluded > 0) {
            line(s, "  %d rounds not counted: the consumer closed before the producer had dropped its reference.",
                    excluded);
        }
    }

    private static String holdLabel(long nanos) {
        return new Reclamation(0, nanos, new long[0], 0).holdLabel();
    }

    /**
     * One row of the results table, as both the text and the Markdown table show it: size,
     * system, p50, p90, p99, tensors/s, GB/s, and the two ratios against {@code base} (the copy
     * baseline at that size, or null when there is none).
     */
    private static String[] cells(BenchResults r, Measurement x, Measurement base) {
        double p50 = latency(r, x, 0.5);
        String vsLatency = x.baseline() ? "baseline" : base == null ? "-" : ratio(latency(r, base, 0.5) / p50);
        String vsThroughput = x.baseline() ? "baseline" : base == null ? "-"
                : ratio(x.throughput().tensorsPerSecond() / base.throughput().tensorsPerSecond());
        return new String[] {ByteSize.label(x.size()), x.system(), micros(p50), micros(latency(r, x, 0.9)),
                micros(latency(r, x, 0.99)), String.format(Locale.ROOT, "%,.0f", x.throughput().tensorsPerSecond()),
                gigabytes(x.throughput().gigabytesPerSecond()), vsLatency, vsThroughput};
    }

    /** The table as Markdown, with the machine, date and load: for a README. */
    static String markdown(BenchResults r) {
        StringBuilder s = new StringBuilder();
        MachineInfo m = r.machine();
        line(s, "Measured %s on %s, %d cores, %s memory, %s, JDK %s. Load average (1/5/15 min) %s at the start, "
                        + "%s at the end; %s of the CPUs' time stolen by the host.", DATE.format(r.date()), m.cpu(),
                m.cores(), m.memory(), m.kernel(), m.jdk(), r.loadBefore(), r.loadAfter(), r.stolen());
        s.append('\n');
        line(s, "| size | system | p50 µs | p90 µs | p99 µs | tensors/s | GB/s | p50 vs copy | tput vs copy |");
        line(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|");
        for (long size : r.settings().sizes()) {
            Measurement base = r.baseline(size);
            for (Measurement x : r.measurements()) {
                if (x.size() != size) {
                    continue;
                }
                line(s, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |", (Object[]) cells(r, x, base));
            }
        }
        if (!r.reclamations().isEmpty()) {
            s.append('\n');
            line(s, "Reclamation latency (consumer's last close → block back in the producer's allocator):");
            s.append('\n');
            line(s, "| size | consumer holds | rounds | p50 µs | p90 µs | p99 µs | max µs | p99 ≤ 1 ms |");
            line(s, "|---|---|--:|--:|--:|--:|--:|---|");
            for (Reclamation x : r.reclamations()) {
                line(s, "| %s | %s | %,d | %s | %s | %s | %s | %s |", ByteSize.label(x.size()), x.holdLabel(),
                        x.rounds(), micros(x.micros(0.5)), micros(x.micros(0.9)), micros(x.micros(0.99)),
                        micros(x.micros(1)), x.meetsTarget() ? "yes" : "**no**");
            }
        }
        s.append('\n');
        line(s, "| target | measured | |");
        line(s, "|---|---|---|");
        for (Targets t : Targets.of(r)) {
            line(s, "| %s | %s | %s |", t.name(), t.measured(), t.met() == null ? t.verdict() : t.met() ? "met"
                    : "**missed**");
        }
        if (r.torch() != null) {
            s.append('\n');
            line(s, "torch.multiprocessing was not measured in this run: %s.", r.torch());
        }
        if (r.python() != null) {
            s.append('\n');
            line(s, "Java<->Python was not measured in this run: %s.", r.python());
        }
        return s.toString();
    }

    static String json(BenchResults r) {
        JsonWriter j = new JsonWriter().beginObject();
        j.field("date", r.date().toString());
        MachineInfo m = r.machine();
        j.newline().name("machine").beginObject().field("cpu", m.cpu()).field("cores", m.cores())
                .field("memory", m.memory()).field("kernel", m.kernel()).field("jdk", m.jdk()).endObject();
        j.newline().name("load_average").beginObject().field("start", r.loadBefore()).field("end", r.loadAfter())
                .endObject();
        j.newline().field("cpu_time_stolen", r.stolen());
        j.newline().name("processes").beginObject().field("producer_pid", r.producerPid())
                .field("consumer_pid", r.consumerPid()).endObject();
        ClockCheck c = r.clock();
        j.newline().name("clock").beginObject().field("source", "System.nanoTime (CLOCK_MONOTONIC on Linux)")
                .field("probes", c.probes()).field("probes_inside", c.inside())
                .field("probe_window_median_ns", c.medianWindowNanos()).field("rounds", r.clockSamples())
                .field("rounds_outside_round_trip", r.clockViolations()).field("one_way_used", r.clockHolds())
                .endObject();
        Settings st = r.settings();
        j.newline().name("settings").beginObject().field("quick", st.quick()).field("iterations", st.iterations())
                .field("warmup_rounds", st.warmup()).field("warmup_seconds", st.warmupSeconds())
                .field("directory", st.directory().toString()).endObject();
        j.newline().name("plans").beginArray();
        for (SizePlan p : r.plans()) {
            j.newline().beginObject().field("size_bytes", p.size()).field("ping_pong_warmup", p.pingPongWarmup())
                    .field("ping_pong_rounds", p.pingPongRounds()).field("stream_warmup", p.streamWarmup())
                    .field("stream_messages", p.streamMessages()).field("window", p.window())
                    .field("reclaim_rounds", p.reclaimRounds()).field("reclaim_held_rounds", p.reclaimHeldRounds())
                    .endObject();
        }
        j.endArray();
        j.newline().name("results").beginArray();
        for (Measurement x : r.measurements()) {
            LatencyStats l = x.latency();
            ThroughputStats t = x.throughput();
            j.newline().beginObject().field("size_bytes", x.size()).field("system", x.system())
                    .field("baseline", x.baseline());
            j.name("latency").beginObject().field("rounds", l.rounds())
                    .field("one_way_p50_us", l.oneWayMicros(0.5)).field("one_way_p90_us", l.oneWayMicros(0.9))
                    .field("one_way_p99_us", l.oneWayMicros(0.99)).field("one_way_mean_us", l.meanOneWayMicros())
                    .field("one_way_min_us", l.oneWayMicros(0)).field("one_way_max_us", l.oneWayMicros(1))
                    .field("half_round_trip_p50_us", l.halfRoundTripMicros(0.5))
                    .field("half_round_trip_p99_us", l.halfRoundTripMicros(0.99))
                    .field("rounds_outside_round_trip", l.clockViolations())
                    .field("shared_cpu_samples", l.sharedCpu().samples())
                    .field("shared_cpu_on_one", l.sharedCpu().onOneCpu())
                    .field("shared_cpu_both_runnable", l.sharedCpu().bothRunnable())
                    .array("one_way_ns", l.oneWayNanos()).array("round_trip_ns", l.roundTripNanos()).endObject();
            j.name("throughput").beginObject().field("messages", t.messages()).field("bytes", t.bytes())
                    .field("consumer_ns", t.nanos()).field("tensors_per_s", t.tensorsPerSecond())
                    .field("gb_per_s", t.gigabytesPerSecond()).field("window", t.window())
                    .field("shared_cpu_samples", t.sharedCpu().samples())
                    .field("shared_cpu_on_one", t.sharedCpu().onOneCpu())
                    .field("shared_cpu_both_runnable", t.sharedCpu().bothRunnable()).endObject();
            j.endObject();
        }
        j.endArray();
        j.newline().name("reclamation").beginArray();
        for (Reclamation x : r.reclamations()) {
            j.newline().beginObject().field("size_bytes", x.size()).field("consumer_hold_us", x.holdNanos() / 1e3)
                    .field("rounds", x.rounds()).field("excluded_rounds", x.excluded())
                    .field("p50_us", x.micros(0.5)).field("p90_us", x.micros(0.9)).field("p99_us", x.micros(0.99))
                    .field("max_us", x.micros(1)).field("p99_within_1ms", x.meetsTarget())
                    .array("latency_ns", x.latencyNanos()).endObject();
        }
        j.endArray();
        j.newline().name("targets").beginArray();
        for (Targets t : Targets.of(r)) {
            j.newline().beginObject().field("target", t.name()).field("measured", t.measured())
                    .name("met");
            if (t.met() == null) {
                j.value((String) null);
            } else {
                j.value(t.met().booleanValue());
            }
            j.endObject();
        }
        j.endArray();
        j.newline().field("torch_skipped", r.torch());
        j.newline().field("python_skipped", r.python());
        BenchResults.Cleanup cl = r.cleanup();
        j.newline().name("cleanup").beginObject().field("consumer_exit", cl.consumerExit())
                .field("python_exit", cl.pythonExit())
                .field("limbo_empty", cl.limboEmpty()).name("files_left").beginArray();
        cl.filesLeft().forEach(j::value);
        j.endArray().endObject();
        j.newline().field("elapsed_s", r.elapsedNanos() / 1e9);
        return j.endObject().toString() + "\n";
    }

    /** The latency the table shows: one way when the shared clock checked out, else half the round trip. */
    static double latency(BenchResults r, Measurement x, double q) {
        return r.clockHolds() ? x.latency().oneWayMicros(q) : x.latency().halfRoundTripMicros(q);
    }

    static String micros(double us) {
        if (us < 10) {
            return String.format(Locale.ROOT, "%.2f", us);
        }
        return us < 1000 ? String.format(Locale.ROOT, "%.1f", us) : String.format(Locale.ROOT, "%,.0f", us);
    }

    private static String gigabytes(double gbs) {
        if (gbs < 10) {
            return String.format(Locale.ROOT, "%.3f", gbs);
        }
        return gbs < 1000 ? String.format(Locale.ROOT, "%.1f", gbs) : String.format(Locale.ROOT, "%,.0f", gbs);
    }

    private static String ratio(double x) {
        return x >= 100 ? String.format(Locale.ROOT, "%,.0fx", x) : String.format(Locale.ROOT, "%.1fx", x);
    }

    private static void line(StringBuilder s, String format, Object... args) {
        s.append(String.format(Locale.ROOT, format, args)).append('\n');
    }
}
