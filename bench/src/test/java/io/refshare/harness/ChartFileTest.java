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
        Path file = dir.resolve("c.png");
        assertTrue(ChartFile.write(file, f -> Files.writeString(f, "png"), log));
        assertTrue(Files.exists(file));
        assertEquals("", logged());
    }

    /** What a jlinked runtime without java.desktop, or a server without fonts, throws while drawing. */
    @Test
    void aRuntimeWithoutAwtOrFontsCostsTheChartOnly(@TempDir Path dir) {
        Path file = dir.resolve("fan-out-1KiB.png");
        assertFalse(ChartFile.write(file, f -> {
            throw new NoClassDefFoundError("java/awt/Shape");
        }, log));
        assertFalse(ChartFile.write(file, f -> {
            throw new InternalError("Fontconfig head is null, check your fonts or fonts configuration");
        }, log));
        assertFalse(Files.exists(file));
        String said = logged();
        assertTrue(said.contains("chart " + file + " not drawn (the numbers are in the text files): "
                + "java.lang.NoClassDefFoundError: java/awt/Shape"), said);
        assertTrue(said.contains("Fontconfig head is null"), said);
    }

    @Test
    void aFileThatCannotBeWrittenIsSaidToo(@TempDir Path dir) {
        Path file = dir.resolve("latency.png");
        assertFalse(ChartFile.write(file, f -> {
            throw new IOException("No space left on device");
        }, log));
        assertTrue(logged().contains("java.io.IOException: No space left on device"), logged());
    }
}
