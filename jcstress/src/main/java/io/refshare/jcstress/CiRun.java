package io.refshare.jcstress;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs the jcstress tests the way CI needs them run: bounded in time, and failing on
 * everything that jcstress itself lets pass with exit code 0 — a selection that matches no
 * test, tests skipped because the machine has too few CPUs for their actors, a run that
 * ends with fewer results than planned. Used by {@code mvn verify} (the jcstress module's
 * exec execution); exits non-zero on any problem.
 *
 * <pre>
 *   java -cp jcstress.jar io.refshare.jcstress.CiRun JAR MODE REGEX RESULTS_DIR TIMEOUT_SECONDS JVM_ARGS ["more jcstress options"]
 * </pre>
 *
 * {@code JVM_ARGS} is the one JVM configuration every test runs in, as one space-separated
 * option line, or {@value #AUTO} for jcstress's own set (the interpreter, C1, C2, and C2 with
 * its compiler stress flags: four JVMs a test instead of one).
 */
public final class CiRun {
    static final String AUTO = "auto";
    private static final Pattern SUMMARY = Pattern.compile(
            "\\(Results: (\\d+) planned; (\\d+) passed, (\\d+) failed, (\\d+) soft errs, (\\d+) hard errs\\)");

    private CiRun() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            fail("usage: CiRun JAR MODE REGEX RESULTS_DIR TIMEOUT_SECONDS JVM_ARGS [\"more jcstress options\"]");
        }
        String jar = args[0];
        String mode = args[1];
        String regex = args[2];
        Path results = Path.of(args[3]);
        long timeoutSeconds = Long.parseLong(args[4]);
        String jvmArgs = args[5].trim();
        // further jcstress options, as one space-separated argument (Maven passes it so)
        List<String> extra = new ArrayList<>();
        if (!jvmArgs.equals(AUTO)) {
            extra.add("-jvmArgs");
            extra.add(jvmArgs); // one argument: jcstress splits the line itself
        }
        for (int i = 6; i < args.length; i++) {
            for (String option : args[i].trim().split("\\s+")) {
                if (!option.isEmpty()) {
                    extra.add(option);
                }
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);

        List<String> tests = new ArrayList<>();
        Pattern selection = Pattern.compile(regex);
        for (String line : run(List.of("-jar", jar, "-l", "-t", regex), deadline, false).lines()) {
            if (selection.matcher(line.trim()).matches()) {
                tests.add(line.trim());
            }
        }
        if (tests.isEmpty()) {
            fail("no jcstress test matches '" + regex + "': nothing would be tested");
        }
        System.out.println("jcstress: " + tests.size() + " tests in mode " + mode + ", JVM "
                + (jvmArgs.equals(AUTO) ? "configurations chosen by jcstress" : "[" + jvmArgs + "]") + ": " + tests);

        List<String> cmd = new ArrayList<>(List.of("-jar", jar, "-m", mode, "-t", regex, "-r", results.toString()));
        cmd.addAll(extra);
        long start = System.nanoTime();
        Output out = run(cmd, deadline, true);
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        if (out.exitCode != 0) {
            fail("jcstress exited with " + out.exitCode + " (a failed or erroneous test); report in " + results);
        }
        String summary = null;
        for (Matcher m = SUMMARY.matcher(out.text); m.find(); ) {
            summary = m.group(); // progress lines repeat it: the last one is the final count
        }
        if (summary == null) {
            fail("jcstress printed no result summary: nothing ran");
        }
        Matcher last = SUMMARY.matcher(summary);
        if (!last.matches()) {
            throw new AssertionError(summary);
        }
        long planned = Long.parseLong(last.group(1));
        long passed = Long.parseLong(last.group(2));
        if (planned == 0 || passed != planned || !"0".equals(last.group(3)) || !"0".equals(last.group(4))
                || !"0".equals(last.group(5))) {
            fail("jcstress: " + last.group() + "; report in " + results);
        }
        for (String test : tests) {
            if (!Files.exists(results.resolve(test + ".html"))) {
                fail("jcstress test " + test + " produced no result (skipped: too few CPUs for its actors?)");
            }
        }
        System.out.println("jcstress: " + tests.size() + " tests, " + passed + " runs passed in " + seconds + " s;"
                + " report in " + results.resolve("index.html"));
    }

    private record Output(int exitCode, String text) {
        List<String> lines() {
            return text.lines().toList();
        }
    }

    /** Runs a JVM with these arguments, optionally echoing its output, killing it at the deadline. */
    private static Output run(List<String> args, long deadline, boolean echo) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(args);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        StringBuilder text = new StringBuilder();
        Thread reader = Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (text) {
                        text.append(line).append('\n');
                    }
                    if (echo) {
                        System.out.println(line);
                    }
                }
            } catch (IOException ignored) {
                // the process was killed; what we have is reported
            }
        });
        long left = deadline - System.nanoTime();
        if (!p.waitFor(Math.max(0, left), TimeUnit.NANOSECONDS)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            p.waitFor();
            fail("jcstress did not finish within its time limit; raise -Djcstress.timeout or choose a lighter mode");
        }
        reader.join();
        synchronized (text) {
            return new Output(p.exitValue(), text.toString());
        }
    }

    private static void fail(String message) {
        System.err.println("FAILED: " + message);
        System.exit(1);
    }
}
