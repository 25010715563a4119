package io.refshare.harness;

import java.io.IOException;
import java.nio.file.Path;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The chart of a run: median latency against payload size, both axes logarithmic, one line
 * per system, as SVG ({@link SvgChart}: no display and no fonts needed where it is drawn).
 */
final class LatencyChart {
    private static final DateTimeFormatter DATE = DateTimeFormatter.ofPattern("yyyy-MM-dd", Locale.ROOT);

    private LatencyChart() {
    }

    static void write(BenchResults r, Path file) throws IOException {
        SvgChart chart = new SvgChart("send -> receive -> first read, median one-way latency (" + DATE.format(r.date())
                + ", " + r.machine().cores() + " cores)", 1000, 640,
                SvgChart.Axis.log("payload size", LatencyChart::sizeLabel),
                SvgChart.Axis.log("p50 latency (us, log scale)", LatencyChart::microsLabel), null);
        for (Map.Entry<String, List<Measurement>> e : bySystem(r).entrySet()) {
            List<Measurement> ms = e.getValue();
            double[] x = new double[ms.size()];
            double[] y = new double[ms.size()];
            for (int i = 0; i < ms.size(); i++) {
                x[i] = ms.get(i).size();
                y[i] = Report.latency(r, ms.get(i), 0.5);
            }
            chart.add(new SvgChart.Series(e.getKey(), x, y, false, SvgChart.Mark.CIRCLE, false));
        }
        chart.writeTo(file);
    }

    /** Measurements per system in table order, each in size order. */
    private static Map<String, List<Measurement>> bySystem(BenchResults r) {
        Map<String, List<Measurement>> out = new LinkedHashMap<>();
        for (long size : r.settings().sizes().stream().sorted().toList()) {
            for (Measurement m : r.measurements()) {
                if (m.size() == size) {
                    out.computeIfAbsent(m.system(), k -> new ArrayList<>()).add(m);
                }
            }
        }
        return out;
    }

    /** The log axis ticks at powers of ten: labelled in decimal units (the points themselves are 1 KiB, 64 KiB, ...). */
    private static String sizeLabel(double bytes) {
        String[] units = {"B", "kB", "MB", "GB", "TB"};
        double v = bytes;
        int unit = 0;
        while (v >= 1000 && unit < units.length - 1) {
            v /= 1000;
            unit++;
        }
        return String.format(Locale.ROOT, "%s %s", v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v)
                : String.format(Locale.ROOT, "%.3g", v), units[unit]);
    }

    private static String microsLabel(double us) {
        if (us >= 1) {
            return String.format(Locale.ROOT, "%,.0f", us);
        }
        return String.format(Locale.ROOT, "%.2g", us);
    }
}
