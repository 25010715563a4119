package io.refshare.harness;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ChartFileTest {
    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final PrintStream log = new PrintStream(logged, true, StandardCharsets.UTF_8);

    private String logged() {
        return logged.toString(StandardCharsets.UTF_8);
    }

    @Test
    void aChartThatIsDrawnIsWrittenAndNothingIsSaid(@TempDir Path dir) {
        Path file = dir.resolve("c.svg");
        assertTrue(ChartFile.write(file, f -> Files.writeString(f, "<svg/>"), log));
        assertTrue(Files.exists(file));
        assertEquals("", logged());
    }

    @Test
    void aChartThatCannotBeDrawnCostsTheChartOnly(@TempDir Path dir) {
        Path file = dir.resolve("fan-out-1KiB.svg");
        assertFalse(ChartFile.write(file, f -> {
            throw new IllegalArgumentException("80 x 60 is too small for a chart");
        }, log));
        assertFalse(Files.exists(file));
        assertTrue(logged().contains("chart " + file + " not drawn (the numbers are in the text files): "
                + "java.lang.IllegalArgumentException: 80 x 60 is too small for a chart"), logged());
    }

    @Test
    void aFileThatCannotBeWrittenIsSaidToo(@TempDir Path dir) {
        Path file = dir.resolve("latency.svg");
        assertFalse(ChartFile.write(file, f -> {
            throw new IOException("No space left on device");
        }, log));
        assertTrue(logged().contains("java.io.IOException: No space left on device"), logged());
    }
}
