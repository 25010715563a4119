package io.refshare.cli;

import io.refshare.harness.PythonPeers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code refshare demo} with Python consumer processes (python/peers/demo_consumer.py on
 * /usr/bin/python3) next to a Java one, in a temporary shared-memory directory: every tensor
 * delivered once and verified byte by byte in both languages, numpy and torch, nothing left.
 */
class DemoPythonConsumersTest {
    private Path dir;

    @BeforeEach
    void createDirectory() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-demo-python-test-");
    }

    @AfterEach
    void removeDirectory() throws IOException {
        List<String> left = files();
        for (String f : left) {
            Files.delete(dir.resolve(f));
        }
        Files.delete(dir);
        assertEquals(List.of(), left, "files left in the directory");
    }

    @Test
    void javaAndPythonConsumersVerifyEveryByteAndNothingIsLeft() throws Exception {
        boolean torch = PythonPeers.hasTorch();
        if (System.getenv("REFSHARE_REQUIRE_TORCH") != null) {
            assertTrue(torch, "REFSHARE_REQUIRE_TORCH is set but " + PythonPeers.PYTHON + " cannot import torch");
        }
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
        try {
            exit = new CommandLine(new DemoCommand()).execute("--python-consumers", "2", "--consumers", "1",
                    "--size", "64KiB", "--duration", "2", "--dir", dir.toString());
        } finally {
            System.setOut(original);
        }
        String output = stdout.toString(StandardCharsets.UTF_8);
        System.out.print(output); // what a user sees, in the test log

        assertEquals(0, exit, output);
        assertTrue(output.contains("(1 Java, 2 Python)"), output);
        assertTrue(output.contains("every byte verified: all correct"), output);
        assertTrue(output.contains("files left behind: none"), output);
        assertTrue(output.contains("OK: every tensor delivered once and verified"), output);
        Matcher each = Pattern.compile("by consumer: java ([0-9,]+), python-numpy ([0-9,]+), python-(numpy|torch) ([0-9,]+)")
                .matcher(output);
        assertTrue(each.find(), output);
        assertEquals(torch ? "torch" : "numpy", each.group(3));
        for (int g : new int[]{1, 2, 4}) {
            assertTrue(Long.parseLong(each.group(g).replace(",", "")) > 0, "every consumer verified tensors: " + output);
        }
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                "no consumer process left running");
    }

    @Test
    void pythonConsumersRefuseDeviceMemory() {
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(new DemoCommand());
        cli.setErr(new PrintWriter(err));
        int exit = cli.execute("--python-consumers", "1", "--device", "cuda", "--dir", dir.toString());
        assertTrue(exit != 0);
        assertTrue(err.toString().contains("--python-consumers share host memory only"), err.toString());
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }
}
