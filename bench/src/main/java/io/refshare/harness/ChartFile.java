package io.refshare.harness;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;

/**
 * Writes one chart, or says why it could not, so that a missing chart never costs the numbers
 * of a run. Drawing needs AWT and fonts: a headless server without fonts ("Fontconfig head is
 * null"), or a runtime trimmed by jlink without {@code java.desktop}, fails there, and the
 * measurements of minutes are written to the text files regardless.
 */
final class ChartFile {
    /** Draws into {@code file}. */
    interface Drawing {
        void draw(Path file) throws IOException;
    }

    private ChartFile() {
    }

    /** True when {@code file} was written; else a line on {@code log} says why, and false. */
    static boolean write(Path file, Drawing drawing, PrintStream log) {
        try {
            drawing.draw(file);
            return true;
        } catch (IOException | RuntimeException | LinkageError | InternalError e) {
            // AWT's failures without fonts or without java.desktop are errors, not exceptions
            log.println("chart " + file + " not drawn (the numbers are in the text files): " + e);
            return false;
        }
    }
}
