package io.refshare.harness;

import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SvgChartTest {
    private static final SvgChart.Axis X = SvgChart.Axis.linear("consumers", v -> String.format(Locale.ROOT, "%.0f", v));
    private static final SvgChart.Axis RATE = SvgChart.Axis.linear("tensors/s", v -> String.format(Locale.ROOT, "%.0f", v));
    private static final SvgChart.Axis MICROS = SvgChart.Axis.linear("p50 (us)", v -> String.format(Locale.ROOT, "%.1f", v));

    private static Document parse(String svg) throws Exception {
        return DocumentBuilderFactory.newInstance().newDocumentBuilder()
                .parse(new ByteArrayInputStream(svg.getBytes(StandardCharsets.UTF_8)));
    }

    private static List<Element> elements(Document d, String tag) {
        NodeList nodes = d.getElementsByTagName(tag);
        List<Element> out = new ArrayList<>();
        for (int i = 0; i < nodes.getLength(); i++) {
            out.add((Element) nodes.item(i));
        }
        return out;
    }

    /** The (x, y) pairs of a polyline's points. */
    private static double[][] points(Element polyline) {
        String p = polyline.getAttribute("points").strip();
        if (p.isEmpty()) {
            return new double[0][];
        }
        return Arrays.stream(p.split(" ")).map(xy -> Arrays.stream(xy.split(",")).mapToDouble(Double::parseDouble)
                .toArray()).toArray(double[][]::new);
    }

    /** The plot's frame: the second rect (the first is the background). */
    private static double[] frame(Document d) {
        Element r = elements(d, "rect").get(1);
        double x = Double.parseDouble(r.getAttribute("x"));
        double y = Double.parseDouble(r.getAttribute("y"));
        return new double[] {x, y, x + Double.parseDouble(r.getAttribute("width")),
                y + Double.parseDouble(r.getAttribute("height"))};
    }

    private static List<String> texts(Document d) {
        return elements(d, "text").stream().map(Element::getTextContent).toList();
    }

    @Test
    void everySeriesIsALineInsideThePlotWithHigherValuesDrawnHigher() throws Exception {
        double[] x = {1, 2, 4, 8};
        Document d = parse(new SvgChart("fan-out", 800, 500, X.withTicksAtData(), RATE, MICROS)
                .add(new SvgChart.Series("aggregate", x, new double[] {900_000, 800_000, 700_000, 650_000}, false,
                        SvgChart.Mark.CIRCLE, false))
                .add(new SvgChart.Series("p50", x, new double[] {1.5, 1.8, 2.0, 2.3}, true, SvgChart.Mark.DIAMOND, false))
                .render());
        assertEquals("svg", d.getDocumentElement().getTagName());
        List<Element> lines = elements(d, "polyline");
        assertEquals(2, lines.size());
        double[] f = frame(d);
        for (Element line : lines) {
            double[][] pts = points(line);
            assertEquals(4, pts.length, line.getAttribute("points"));
            for (double[] p : pts) {
                assertTrue(p[0] >= f[0] && p[0] <= f[2] && p[1] >= f[1] && p[1] <= f[3], Arrays.toString(p));
            }
            for (int i = 1; i < pts.length; i++) {
                assertTrue(pts[i][0] > pts[i - 1][0], "x grows to the right");
            }
        }
        double[][] rate = points(lines.get(0));
        assertTrue(rate[0][1] < rate[3][1], "900k is drawn above 650k (SVG's y grows downwards)");
        double[][] p50 = points(lines.get(1));
        assertTrue(p50[3][1] < p50[0][1], "2.3 us is drawn above 1.5 us");
        // the right axis has its own range: microseconds are not squashed against the rate's scale
        assertTrue(f[3] - p50[3][1] > (f[3] - f[1]) / 2, "the largest p50 is in the upper half of the plot");
        // ticks at the data's own x values, and a legend entry per series
        List<String> texts = texts(d);
        assertTrue(texts.containsAll(List.of("1", "2", "4", "8", "aggregate", "p50")), texts.toString());
        assertEquals(5, elements(d, "circle").size(), "four markers on the line, one in the legend");
    }

    @Test
    void logAxesTickAtPowersOfTenAndLeaveOutWhatTheyCannotShow() throws Exception {
        Document d = parse(new SvgChart("latency", 1000, 640,
                SvgChart.Axis.log("size", v -> String.format(Locale.ROOT, "%.0e", v)),
                SvgChart.Axis.log("p50", v -> String.format(Locale.ROOT, "%.0e", v)), null)
                .add(new SvgChart.Series("refshare", new double[] {1024, 65536, 1 << 20, 16 << 20},
                        new double[] {1.5, 0, Double.NaN, 80}, false, SvgChart.Mark.CIRCLE, false))
                .render());
        double[][] pts = points(elements(d, "polyline").get(0));
        assertEquals(2, pts.length, "zero and NaN have no place on a log axis: left out, not thrown");
        List<String> texts = texts(d);
        // x from 10^3 to 10^8 (16 MiB), y from 10^0 to 10^2
        for (String tick : List.of("1e+03", "1e+04", "1e+05", "1e+06", "1e+07", "1e+08", "1e+00", "1e+01", "1e+02")) {
            assertTrue(texts.contains(tick), tick + " in " + texts);
        }
        assertTrue(texts.stream().noneMatch(t -> t.equals("1e+09") || t.equals("1e-01")), texts.toString());
        double[] f = frame(d);
        assertTrue(pts[0][0] > f[0] && pts[0][0] < f[0] + 0.01 * (f[2] - f[0]), "1 KiB sits just right of 10^3");
    }

    @Test
    void aDashedLineHasNoMarkersAndTextIsEscaped() throws Exception {
        String svg = new SvgChart("a <b> & \"c\"", 800, 500, X, RATE, null)
                .add(new SvgChart.Series("target < 0.8 x", new double[] {1, 8}, new double[] {5, 5}, false,
                        SvgChart.Mark.NONE, true))
                .render();
        Document d = parse(svg);
        assertTrue(texts(d).contains("a <b> & \"c\""), texts(d).toString());
        Element line = elements(d, "polyline").get(0);
        assertEquals("6 4", line.getAttribute("stroke-dasharray"));
        assertEquals(0, elements(d, "circle").size() + elements(d, "path").size());
    }

    @Test
    void seriesPastThePaletteAreDashedSoNoTwoLinesLookAlike() throws Exception {
        SvgChart chart = new SvgChart("many", 1000, 640, X, RATE, null);
        for (int i = 0; i < 12; i++) {
            chart.add(new SvgChart.Series("s" + i, new double[] {1, 2}, new double[] {i, i + 1}, false,
                    SvgChart.Mark.CIRCLE, false));
        }
        List<Element> lines = elements(parse(chart.render()), "polyline");
        List<String> looks = new ArrayList<>();
        for (Element line : lines) {
            looks.add(line.getAttribute("stroke") + " " + line.getAttribute("stroke-dasharray"));
        }
        assertEquals(12, looks.stream().distinct().count(), looks.toString());
        assertEquals("", lines.get(0).getAttribute("stroke-dasharray"));
        assertEquals("6 4", lines.get(11).getAttribute("stroke-dasharray"));
    }

    @Test
    void aChartWithoutDataIsStillAChart() throws Exception {
        Document d = parse(new SvgChart("empty", 800, 500, X, RATE, null)
                .add(new SvgChart.Series("nothing", new double[0], new double[0], false, SvgChart.Mark.CIRCLE, false))
                .render());
        assertEquals(0, points(elements(d, "polyline").get(0)).length);
    }

    @Test
    void misuseIsRefusedPlainly() {
        assertThrows(IllegalArgumentException.class, () -> new SvgChart.Series("s", new double[2], new double[3], false,
                SvgChart.Mark.NONE, false));
        assertThrows(IllegalArgumentException.class, () -> new SvgChart("t", 800, 500, X, RATE, null)
                .add(new SvgChart.Series("s", new double[1], new double[1], true, SvgChart.Mark.NONE, false)));
        assertThrows(IllegalArgumentException.class, () -> new SvgChart("t", 100, 80, X, RATE, null).render());
    }

    @Test
    void stepsAreOneTwoOrFiveTimesAPowerOfTen() {
        assertEquals(1, SvgChart.niceStep(0.7), 1e-9);
        assertEquals(2, SvgChart.niceStep(1.3), 1e-9);
        assertEquals(5, SvgChart.niceStep(4.1), 1e-9);
        assertEquals(200_000, SvgChart.niceStep(180_000), 1e-6);
        assertEquals(0.05, SvgChart.niceStep(0.031), 1e-12);
    }
}
