package io.refshare.harness;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The PNG chart of a run: median latency against payload size, both axes logarithmic, one
 * line per system, drawn with XChart off-screen (headless: no display is needed or used).
 */
final class LatencyChart {
    private static final DateTimeFormatter DATE = DateTimeFormatter.ofPattern("yyyy-MM-dd", Locale.ROOT);

    private LatencyChart() {
    }

    static void write(BenchResults r, Path file) throws IOException {
        if (System.getProperty("java.awt.headless") == null) {
            System.setProperty("java.awt.headless", "true"); // before AWT loads: a chart needs no display
        }
        XYChart chart = new XYChartBuilder().width(1000).height(640)
                .title("send -> receive -> first read, median one-way latency (" + DATE.format(r.date()) + ", "
                        + r.machine().cores() + " cores)")
                .xAxisTitle("payload size").yAxisTitle("p50 latency (us, log scale)").build();
        chart.getStyler().setXAxisLogarithmic(true).setYAxisLogarithmic(true)
                .setXAxisTickLabelsFormattingFunction(LatencyChart::sizeLabel)
                .setYAxisTickLabelsFormattingFunction(LatencyChart::microsLabel)
                .setLegendPosition(Styler.LegendPosition.InsideNW)
                .setMarkerSize(7).setChartBackgroundColor(java.awt.Color.WHITE);
        for (Map.Entry<String, List<Measurement>> e : bySystem(r).entrySet()) {
            List<Measurement> ms = e.getValue();
            double[] x = new double[ms.size()];
            double[] y = new double[ms.size()];
            for (int i = 0; i < ms.size(); i++) {
                x[i] = ms.get(i).size();
                y[i] = Report.latency(r, ms.get(i), 0.5);
            }
            chart.addSeries(e.getKey(), x, y).setMarker(SeriesMarkers.CIRCLE);
        }
        Files.createDirectories(file.toAbsolutePath().getParent());
        try (OutputStream out = Files.newOutputStream(file)) {
            BitmapEncoder.saveBitmap(chart, out, BitmapEncoder.BitmapFormat.PNG);
        }
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
    private static String sizeLabel(Double bytes) {
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

    private static String microsLabel(Double us) {
        if (us >= 1) {
            return String.format(Locale.ROOT, "%,.0f", us);
        }
        return String.format(Locale.ROOT, "%.2g", us);
    }
}
