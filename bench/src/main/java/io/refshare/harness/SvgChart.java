package io.refshare.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.DoubleFunction;
import java.util.stream.Stream;

/**
 * A line chart written as SVG text. Nothing is measured or rasterised here: the viewer lays
 * out the text, so a headless server without fonts, or a runtime without {@code java.desktop},
 * draws the bench's charts as well as a desktop does (an AWT chart failed there with
 * "Fontconfig head is null").
 *
 * <p>Enough for the bench's charts and no more: an x axis and a left y axis, each linear or
 * logarithmic, an optional linear right y axis with its own range, series drawn as lines with
 * markers or as a dashed line, and a legend under the plot. Points that an axis cannot show
 * (not finite, or not positive on a logarithmic axis) are left out of their line.
 */
final class SvgChart {
    enum Scale { LINEAR, LOG }

    enum Mark { CIRCLE, DIAMOND, NONE }

    /**
     * One axis. A linear one spans zero and ticks at round steps, or with {@code ticksAtData}
     * spans the data alone and ticks at the data's own values (1, 2, 4, 8 consumers).
     */
    record Axis(String title, Scale scale, boolean ticksAtData, DoubleFunction<String> label) {
        static Axis linear(String title, DoubleFunction<String> label) {
            return new Axis(title, Scale.LINEAR, false, label);
        }

        static Axis log(String title, DoubleFunction<String> label) {
            return new Axis(title, Scale.LOG, false, label);
        }

        /** This axis, spanning the data alone, with its ticks at the data's values. */
        Axis withTicksAtData() {
            return new Axis(title, scale, true, label);
        }
    }

    record Series(String name, double[] x, double[] y, boolean onRightAxis, Mark mark, boolean dashed) {
        Series {
            if (x.length != y.length) {
                throw new IllegalArgumentException(name + ": " + x.length + " x values, " + y.length + " y values");
            }
        }
    }

    private static final String[] COLORS = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
            "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"};
    private static final int LEFT = 90;
    private static final int TOP = 50;
    private static final int BOTTOM = 60;
    private static final int LEGEND_ROW = 20;

    private final String title;
    private final int width;
    private final int height;
    private final Axis x;
    private final Axis left;
    private final Axis right;
    private final List<Series> series = new ArrayList<>();

    /**
     * A chart of {@code width} × {@code height} pixels, and a legend row per series below;
     * {@code right} is null for a chart with one y axis.
     */
    SvgChart(String title, int width, int height, Axis x, Axis left, Axis right) {
        if (right != null && right.scale() != Scale.LINEAR) {
            throw new IllegalArgumentException("a right axis must be linear");
        }
        this.title = title;
        this.width = width;
        this.height = height;
        this.x = x;
        this.left = left;
        this.right = right;
    }

    SvgChart add(Series s) {
        if (s.onRightAxis() && right == null) {
            throw new IllegalArgumentException(s.name() + " is on a right axis this chart does not have");
        }
        series.add(s);
        return this;
    }

    /** Writes {@link #render} to {@code file}, making its directory if need be. */
    void writeTo(Path file) throws IOException {
        Files.createDirectories(file.toAbsolutePath().getParent());
        Files.writeString(file, render());
    }

    String render() {
        int plotRight = width - (right == null ? 30 : 90);
        int plotBottom = height - BOTTOM;
        int total = height + LEGEND_ROW * series.size();
        if (plotRight - LEFT < 50 || plotBottom - TOP < 50) {
            throw new IllegalArgumentException(width + " x " + height + " is too small for a chart");
        }
        Mapping mx = mapping(x, finite(series.stream().map(Series::x)), LEFT, plotRight);
        Mapping ml = mapping(left, finite(series.stream().filter(se -> !se.onRightAxis()).map(Series::y)), plotBottom, TOP);
        Mapping mr = right == null ? null
                : mapping(right, finite(series.stream().filter(Series::onRightAxis).map(Series::y)), plotBottom, TOP);

        StringBuilder s = new StringBuilder();
        s.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                + "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">%n", width, total, width, total));
        s.append(String.format(Locale.ROOT, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>%n", width, total));
        text(s, width / 2.0, 25, "middle", "font-size=\"15\"", title);
        // grid and ticks
        for (double t : mx.ticks()) {
            double px = mx.at(t);
            line(s, px, TOP, px, plotBottom, "#e0e0e0");
            text(s, px, plotBottom + 18, "middle", "", x.label().apply(t));
        }
        for (double t : ml.ticks()) {
            double py = ml.at(t);
            line(s, LEFT, py, plotRight, py, "#e0e0e0");
            text(s, LEFT - 6, py + 4, "end", "", left.label().apply(t));
        }
        if (mr != null) {
            for (double t : mr.ticks()) {
                text(s, plotRight + 6, mr.at(t) + 4, "start", "", right.label().apply(t));
            }
        }
        s.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                + "stroke=\"#404040\"/>%n", LEFT, TOP, plotRight - LEFT, plotBottom - TOP));
        text(s, (LEFT + plotRight) / 2.0, plotBottom + 40, "middle", "", x.title());
        verticalText(s, 20, (TOP + plotBottom) / 2.0, left.title());
        if (right != null) {
            verticalText(s, width - 15, (TOP + plotBottom) / 2.0, right.title());
        }
        // the lines, then the legend
        for (int i = 0; i < series.size(); i++) {
            Series se = series.get(i);
            String color = COLORS[i % COLORS.length];
            // past the palette, colours come round again: dashed, with diamonds, so no two lines look alike
            boolean again = i / COLORS.length % 2 == 1;
            boolean dashed = se.dashed() || again;
            Mark mark = again && se.mark() == Mark.CIRCLE ? Mark.DIAMOND : se.mark();
            Mapping my = se.onRightAxis() ? mr : ml;
            StringBuilder points = new StringBuilder();
            List<double[]> marks = new ArrayList<>();
            for (int k = 0; k < se.x().length; k++) {
                if (mx.shows(se.x()[k]) && my.shows(se.y()[k])) {
                    double px = mx.at(se.x()[k]);
                    double py = my.at(se.y()[k]);
                    points.append(String.format(Locale.ROOT, "%s%.1f,%.1f", points.isEmpty() ? "" : " ", px, py));
                    marks.add(new double[] {px, py});
                }
            }
            s.append(String.format(Locale.ROOT, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
                    + "points=\"%s\"><title>%s</title></polyline>%n", color,
                    dashed ? " stroke-dasharray=\"6 4\"" : "", points, escape(se.name())));
            for (double[] m : marks) {
                mark(s, mark, m[0], m[1], color);
            }
            double ly = plotBottom + 55 + LEGEND_ROW * i;
            line(s, LEFT, ly - 4, LEFT + 30, ly - 4, color, dashed);
            mark(s, mark, LEFT + 15, ly - 4, color);
            text(s, LEFT + 40, ly, "start", "", se.name());
        }
        s.append("</svg>\n");
        return s.toString();
    }

    /** The finite values among {@code columns}: what an axis must span. */
    private static double[] finite(Stream<double[]> columns) {
        return columns.flatMapToDouble(Arrays::stream).filter(Double::isFinite).toArray();
    }

    /** Where an axis puts a value, between the pixel positions {@code from} (its low end) and {@code to}. */
    private record Mapping(Scale scale, double low, double high, double from, double to, double[] ticks) {
        boolean shows(double v) {
            return Double.isFinite(v) && (scale == Scale.LINEAR || v > 0);
        }

        double at(double v) {
            double f = scale == Scale.LOG ? (Math.log10(v) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))
                    : (v - low) / (high - low);
            return from + f * (to - from);
        }
    }

    private static Mapping mapping(Axis axis, double[] data, double from, double to) {
        if (axis.scale() == Scale.LOG) {
            double[] positive = Arrays.stream(data).filter(v -> v > 0).toArray();
            double lo = positive.length == 0 ? 1 : Math.pow(10, Math.floor(Math.log10(Arrays.stream(positive).min().getAsDouble())));
            double hi = positive.length == 0 ? 10 : Math.pow(10, Math.ceil(Math.log10(Arrays.stream(positive).max().getAsDouble())));
            if (hi <= lo) {
                hi = lo * 10;
            }
            List<Double> ticks = new ArrayList<>();
            for (double t = lo; t <= hi * 1.0001; t *= 10) {
                ticks.add(t);
            }
            return new Mapping(Scale.LOG, lo, hi, from, to, ticks.stream().mapToDouble(Double::doubleValue).toArray());
        }
        double min = data.length == 0 ? 0 : Arrays.stream(data).min().getAsDouble();
        double max = data.length == 0 ? 1 : Arrays.stream(data).max().getAsDouble();
        if (!axis.ticksAtData()) {
            min = Math.min(0, min);
            max = Math.max(0, max);
        }
        if (max <= min) {
            max = min + (min == 0 ? 1 : Math.abs(min));
        }
        if (axis.ticksAtData()) {
            double[] ticks = Arrays.stream(data).distinct().sorted().toArray();
            double pad = (max - min) * 0.05;
            return new Mapping(Scale.LINEAR, min - pad, max + pad, from, to, ticks);
        }
        double step = niceStep((max - min) / 5);
        double lo = Math.floor(min / step) * step;
        double hi = Math.ceil(max / step) * step;
        int n = (int) Math.round((hi - lo) / step);
        double[] ticks = new double[n + 1];
        for (int i = 0; i <= n; i++) {
            ticks[i] = lo + i * step;
        }
        return new Mapping(Scale.LINEAR, lo, hi, from, to, ticks);
    }

    /** The smallest of 1, 2 and 5 times a power of ten that is at least {@code raw}. */
    static double niceStep(double raw) {
        double magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
        for (double m : new double[] {1, 2, 5, 10}) {
            if (m * magnitude >= raw * 0.9999) {
                return m * magnitude;
            }
        }
        return 10 * magnitude;
    }

    private static void mark(StringBuilder s, Mark mark, double x, double y, String color) {
        switch (mark) {
            case CIRCLE -> s.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>%n",
                    x, y, color));
            case DIAMOND -> s.append(String.format(Locale.ROOT, "<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" fill=\"%s\"/>%n",
                    x, y - 5, color));
            case NONE -> { }
        }
    }

    private static void line(StringBuilder s, double x1, double y1, double x2, double y2, String color) {
        line(s, x1, y1, x2, y2, color, false);
    }

    private static void line(StringBuilder s, double x1, double y1, double x2, double y2, String color, boolean dashed) {
        s.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"%s/>%n",
                x1, y1, x2, y2, color, dashed ? " stroke-width=\"2\" stroke-dasharray=\"6 4\"" : ""));
    }

    private static void text(StringBuilder s, double x, double y, String anchor, String attributes, String text) {
        s.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>%s</text>%n",
                x, y, anchor, attributes.isEmpty() ? "" : " " + attributes, escape(text)));
    }

    private static void verticalText(StringBuilder s, double x, double y, String text) {
        s.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                + "transform=\"rotate(-90 %.1f %.1f)\">%s</text>%n", x, y, x, y, escape(text)));
    }

    static String escape(String text) {
        StringBuilder out = new StringBuilder(text.length());
        for (char c : text.toCharArray()) {
            switch (c) {
                case '<' -> out.append("&lt;");
                case '>' -> out.append("&gt;");
                case '&' -> out.append("&amp;");
                case '"' -> out.append("&quot;");
                default -> out.append(c < 0x20 && c != '\t' && c != '\n' ? ' ' : c);
            }
        }
        return out.toString();
    }
}
