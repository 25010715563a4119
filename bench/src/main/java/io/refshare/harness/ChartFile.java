package io.refshare.harness;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;

/**
 * Writes one chart, or says why it could not, so that a missing chart never costs the numbers
 * of a run (a full disk, a directory that cannot be written, a chart that cannot be drawn):
 * the measurements of minutes are written to the text files regardless.
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
        } catch (IOException | RuntimeException e) {
            log.println("chart " + file + " not drawn (the numbers are in the text files): " + e);
            return false;
        }
    }
}
