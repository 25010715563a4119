package io.refshare.harness;


import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * The measured targets of the design (docs/benchmarks.md), checked against what this
 * run measured (nothing here is assumed: a target whose measurement is not in the run says so).
 *
 * @param name     the target as the design states it
 * @param measured the figure this run measured
 * @param met      true when met, false when missed, null when this run did not measure it
 */
record Targets(String name, String measured, Boolean met) {
    static final double MEDIAN_TARGET_MICROS = 5;
    static final double SMALL_RATE_TARGET = 500_000;
    static final long SMALL_SIZE = 1024;
    static final double PYTHON_VS_TORCH_TARGET = 10;
    static final double PYTHON_SMALL_RATE_TARGET = 50_000;

    String verdict() {
        return met == null ? "not measured" : met ? "met" : "MISSED";
    }

    static List<Targets> of(BenchResults r) {
        List<Targets> out = new ArrayList<>();
        for (Mode mode : Mode.values()) {
            String system = Measurement.REFSHARE + mode.label();
            List<Measurement> ms = r.measurements().stream().filter(m -> m.system().equals(system)).toList();
            String name = "median latency <= 5 us at every size, flat in size (" + system + ")";
            if (ms.isEmpty()) {
                out.add(new Targets(name, "-", null));
                continue;
            }
            Measurement lo = ms.stream().min(Comparator.comparingDouble(m -> Report.latency(r, m, 0.5))).get();
            Measurement hi = ms.stream().max(Comparator.comparingDouble(m -> Report.latency(r, m, 0.5))).get();
            double max = Report.latency(r, hi, 0.5);
            out.add(new Targets(name, String.format(Locale.ROOT, "p50 %s us (%s) to %s us (%s)",
                    Report.micros(Report.latency(r, lo, 0.5)), ByteSize.label(lo.size()), Report.micros(max),
                    ByteSize.label(hi.size())),
                    max <= MEDIAN_TARGET_MICROS));
        }
        for (Mode mode : Mode.values()) {
            String system = Measurement.REFSHARE + mode.label();
            String name = ">= 500,000 tensors/s at 1 KiB for one producer/consumer pair (" + system + ")";
            Optional<Measurement> m = r.measurements().stream()
                    .filter(x -> x.system().equals(system) && x.size() == SMALL_SIZE).findFirst();
            out.add(m.map(x -> new Targets(name, String.format(Locale.ROOT, "%,.0f tensors/s",
                            x.throughput().tensorsPerSecond()), x.throughput().tensorsPerSecond() >= SMALL_RATE_TARGET))
                    .orElseGet(() -> new Targets(name, "1 KiB not in this run", null)));
        }
        for (long hold : new long[]{Reclamation.AT_ONCE_NANOS, Reclamation.HELD_NANOS}) {
            List<Reclamation> rs = r.reclamations().stream().filter(x -> x.holdNanos() == hold && x.rounds() > 0)
                    .toList();
            String label = rs.isEmpty() ? "" : rs.getFirst().holdLabel();
            String name = "reclamation p99 <= 1 ms (consumer holds " + label + ")";
            if (rs.isEmpty()) {
                out.add(new Targets(name, "-", null));
                continue;
            }
            Reclamation worst = rs.stream().max(Comparator.comparingDouble(x -> x.micros(0.99))).get();
            out.add(new Targets(name, String.format(Locale.ROOT, "worst p99 %s us (%s); p50 %s us there",
                    Report.micros(worst.micros(0.99)), ByteSize.label(worst.size()), Report.micros(worst.micros(0.5))),
                    rs.stream().allMatch(Reclamation::meetsTarget)));
        }
        smallEndTargets(r, out);
        smallStreamingTargets(r, out);
        pythonTargets(r, out);
        return out;
    }

    /** The small end: 1 KiB ping-pong against the Agrona ring, with the default and the busy-spin strategy. */
    private static void smallEndTargets(BenchResults r, List<Targets> out) {
        Optional<Measurement> agrona = at1KiB(r, AgronaBench.SYSTEM);
        Optional<Measurement> spin = at1KiB(r, Measurement.BUSY_SPIN + Mode.REUSE.label());
        String name = "1 KiB ping-pong p50 with busy-spin <= 2x the Agrona ring's";
        if (agrona.isEmpty() || spin.isEmpty()) {
            out.add(new Targets(name, "1 KiB or a row not in this run", null));
        } else {
            double ratio = Report.latency(r, spin.get(), 0.5) / Report.latency(r, agrona.get(), 0.5);
            out.add(new Targets(name, String.format(Locale.ROOT, "%s us vs %s us: %.1fx",
                    Report.micros(Report.latency(r, spin.get(), 0.5)), Report.micros(Report.latency(r, agrona.get(), 0.5)),
                    ratio), ratio <= 2));
        }
        String reuse = Measurement.REFSHARE + Mode.REUSE.label();
        out.add(at1KiB(r, reuse).map(m -> new Targets("1 KiB ping-pong p50 <= 3 us with the default strategy (" + reuse
                        + ")", Report.micros(Report.latency(r, m, 0.5)) + " us", Report.latency(r, m, 0.5) <= 3))
                .orElseGet(() -> new Targets("1 KiB ping-pong p50 <= 3 us with the default strategy", "1 KiB not in "
                        + "this run", null)));
    }

    /** The small end's streaming: single put/take at least 2x the socket copy's tensors/s, batches of 32 at least 5x. */
    private static void smallStreamingTargets(BenchResults r, List<Targets> out) {
        Optional<Measurement> socket = at1KiB(r, Measurement.SOCKET);
        String[][] rows = {{Measurement.REFSHARE + Mode.REUSE.label(), "2"},
                {Measurement.BATCHES + Measurement.BATCH_SIZE, "5"}};
        for (String[] row : rows) {
            double factor = Double.parseDouble(row[1]);
            String name = "1 KiB streaming >= " + row[1] + "x the socket copy's tensors/s (" + row[0] + ")";
            Optional<Measurement> ours = at1KiB(r, row[0]);
            if (socket.isEmpty() || ours.isEmpty()) {
                out.add(new Targets(name, "1 KiB or a row not in this run", null));
                continue;
            }
            double ratio = ours.get().throughput().tensorsPerSecond() / socket.get().throughput().tensorsPerSecond();
            out.add(new Targets(name, String.format(Locale.ROOT, "%,.0f vs %,.0f tensors/s: %.1fx",
                    ours.get().throughput().tensorsPerSecond(), socket.get().throughput().tensorsPerSecond(), ratio),
                    ratio >= factor));
        }
    }

    private static Optional<Measurement> at1KiB(BenchResults r, String system) {
        return r.measurements().stream().filter(x -> x.system().equals(system) && x.size() == SMALL_SIZE).findFirst();
    }

    /**
     * Java -> Python (numpy): p50 at least 10x lower than torch.multiprocessing's best
     * strategy at every size, mode against the same mode; at least 50,000 tensors/s at 1 KiB.
     */
    private static void pythonTargets(BenchResults r, List<Targets> out) {
        for (Mode mode : Mode.values()) {
            String system = PythonBench.JAVA_TO_PYTHON + mode.label();
            String label = system.substring(Measurement.REFSHARE.length());
            String name = "p50 >= 10x below torch.mp's best strategy, same mode, every size (" + label + ")";
            List<Measurement> ours = r.measurements().stream().filter(m -> m.system().equals(system)).toList();
            if (ours.isEmpty()) {
                out.add(new Targets(name, "-", null));
                continue;
            }
            List<String> ratios = new ArrayList<>();
            boolean met = true;
            boolean measured = true;
            for (Measurement m : ours) {
                Optional<Measurement> torch = r.measurements().stream()
                        .filter(x -> x.size() == m.size() && x.system().startsWith("torch.mp ")
                                && x.system().endsWith(" " + mode.label()))
                        .min(Comparator.comparingDouble(x -> Report.latency(r, x, 0.5)));
                if (torch.isEmpty()) {
                    measured = false;
                    ratios.add(ByteSize.label(m.size()) + " no torch row");
                    continue;
                }
                double ratio = Report.latency(r, torch.get(), 0.5) / Report.latency(r, m, 0.5);
                met &= ratio >= PYTHON_VS_TORCH_TARGET;
                ratios.add(String.format(Locale.ROOT, "%s %.1fx", ByteSize.label(m.size()), ratio));
            }
            out.add(new Targets(name, String.join(", ", ratios), measured ? met : null));
        }
        for (Mode mode : Mode.values()) {
            String system = PythonBench.JAVA_TO_PYTHON + mode.label();
            String name = ">= 50,000 tensors/s at 1 KiB (" + system.substring(Measurement.REFSHARE.length()) + ")";
            Optional<Measurement> m = r.measurements().stream()
                    .filter(x -> x.system().equals(system) && x.size() == SMALL_SIZE).findFirst();
            out.add(m.map(x -> new Targets(name, String.format(Locale.ROOT, "%,.0f tensors/s",
                            x.throughput().tensorsPerSecond()),
                            x.throughput().tensorsPerSecond() >= PYTHON_SMALL_RATE_TARGET))
                    .orElseGet(() -> new Targets(name, "1 KiB not in this run", null)));
        }
    }
}
