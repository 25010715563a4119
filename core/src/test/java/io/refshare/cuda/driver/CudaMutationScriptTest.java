package io.refshare.cuda.driver;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The mutation check of {@code docs/cuda.md} stays repeatable: every mutation in
 * {@code scripts/cuda-mutation-check.sh} still finds its text in the file it mutates and names
 * a test that exists. The check itself (each mutation makes its test fail) takes a build per
 * mutation, so it is a documented command rather than part of the suite; this test keeps it
 * from going stale unnoticed as the code it mutates moves on, as three of its mutations once did.
 */
class CudaMutationScriptTest {
    @Test
    void everyMutationStillAppliesAndNamesATestThatExists() throws IOException, InterruptedException {
        Path root = CudaTestSupport.moduleDirectory().toAbsolutePath().getParent();
        Path script = root.resolve("scripts/cuda-mutation-check.sh");
        assertTrue(Files.isRegularFile(script), "the script is at " + script);
        Process p = new ProcessBuilder("bash", script.toString(), "--check").directory(root.toFile())
                .redirectErrorStream(true).start();
        p.getOutputStream().close();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the check finishes");
        assertEquals(0, p.exitValue(), "every mutation applies:\n" + output);
        long applies = output.lines().filter(l -> l.startsWith("APPLIES ")).count();
        assertTrue(applies >= 16, "the script still lists its mutations (" + applies + "):\n" + output);
    }
}
