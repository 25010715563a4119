package io.refshare.cuda.driver;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Which CUDA driver the CUDA tests of this JVM run against, decided once:
 * <ul>
 * <li>{@code REFSHARE_CUDA=real}: the real driver ({@link CudaDriver#configuredLibrary()}); the
 * tests fail if it cannot be used, since it was asked for.</li>
 * <li>{@code REFSHARE_CUDA=double}: the test double, built here with gcc (or {@code $CC}) from
 * {@code src/test/c/refshare_cuda_test_double.c}; the tests fail if it cannot be built.</li>
 * <li>unset: the real driver when it loads and has a device, else the test double when gcc is
 * there, else every CUDA test is skipped with the reason in the test output.</li>
 * </ul>
 * In double mode this JVM's {@link CudaDriver#system()} is pointed at the double (the system
 * property), and child JVMs get its path as an argument.
 */
final class CudaTestSupport {
    enum Mode { REAL, DOUBLE }

    static final String MODE_ENV = "REFSHARE_CUDA";
    static final String SOURCE = "src/test/c/refshare_cuda_test_double.c";

    private static final Decision DECISION = decide();

    /** A mode and its library, or why there is none (skip) or why the asked-for one failed (fail). */
    private record Decision(Mode mode, String library, String skipReason, String failure) {
    }

    private CudaTestSupport() {
    }

    /** The mode; skips the calling test when there is neither a driver nor a double. */
    static Mode require() {
        if (DECISION.failure() != null) {
            fail(DECISION.failure());
        }
        Assumptions.assumeTrue(DECISION.skipReason() == null, DECISION.skipReason());
        return DECISION.mode();
    }

    /** Skips the calling test unless it runs against the double (which it needs to observe or steer the "driver"). */
    static void requireDouble(String why) {
        Mode mode = require();
        Assumptions.assumeTrue(mode == Mode.DOUBLE, "needs the CUDA test double to " + why
                + "; this run uses the real driver");
    }

    /** The library child JVMs load (a path for the double). */
    static String library() {
        require();
        return DECISION.library();
    }

    static boolean isDouble() {
        return DECISION.mode() == Mode.DOUBLE;
    }

    /** The test double's control entry points (double mode only). */
    static TestDouble testDouble() {
        requireDouble("control the driver");
        return TestDouble.load(DECISION.library());
    }

    private static Decision decide() {
        String requested = System.getenv(MODE_ENV);
        requested = requested == null ? "" : requested.trim().toLowerCase(java.util.Locale.ROOT);
        switch (requested) {
            case "real" -> {
                String why = realDriverProblem();
                return why == null ? new Decision(Mode.REAL, CudaDriver.configuredLibrary(), null, null)
                        : new Decision(null, null, null, MODE_ENV + "=real but the CUDA driver cannot be used: " + why);
            }
            case "double" -> {
                BuildResult built = buildDouble();
                return built.library != null ? useDouble(built.library)
                        : new Decision(null, null, null, MODE_ENV + "=double but " + built.problem);
            }
            case "", "auto" -> {
                String why = realDriverProblem();
                if (why == null) {
                    return new Decision(Mode.REAL, CudaDriver.configuredLibrary(), null, null);
                }
                BuildResult built = buildDouble();
                if (built.library != null) {
                    return useDouble(built.library);
                }
                String reason = "CUDA tests skipped: no usable CUDA driver (" + why + ") and " + built.problem;
                System.out.println(reason);
                return new Decision(null, null, reason, null);
            }
            default -> {
                return new Decision(null, null, null, MODE_ENV + " must be 'real', 'double' or unset, was '"
                        + requested + "'");
            }
        }
    }

    private static Decision useDouble(Path library) {
        System.setProperty(CudaDriver.LIBRARY_PROPERTY, library.toString());
        System.out.println("CUDA tests run against the test double " + library + " (no GPU driver here)");
        return new Decision(Mode.DOUBLE, library.toString(), null, null);
    }

    /** Null when the configured real driver loads, starts and has a device; else why not. */
    private static String realDriverProblem() {
        try {
            CudaDriver driver = CudaDriver.load(CudaDriver.configuredLibrary());
            return driver.deviceCount() > 0 ? null : "it reports no device";
        } catch (RuntimeException e) {
            return e.getMessage();
        }
    }

    private record BuildResult(Path library, String problem) {
    }

    static Path moduleDirectory() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir")));
    }

    /** Builds the double into target/cuda-test-double (a fresh build per JVM, moved into place atomically). */
    private static BuildResult buildDouble() {
        Path source = moduleDirectory().resolve(SOURCE);
        if (!Files.isRegularFile(source)) {
            return new BuildResult(null, "the test double's source " + source + " is missing");
        }
        try {
            Path dir = Files.createDirectories(moduleDirectory().resolve("target/cuda-test-double"));
            Path library = dir.resolve("librefshare-cuda-test-double.so");
            Path building = Files.createTempFile(dir, "building-", ".so");
            List<String> cmd = new ArrayList<>(List.of(compiler(), "-std=c11", "-O2", "-g", "-Wall", "-Wextra",
                    "-Werror", "-fPIC", "-fvisibility=hidden", "-shared", "-pthread"));
            cmd.addAll(List.of("-o", building.toString(), source.toString()));
            String problem = run(cmd);
            if (problem != null) {
                Files.deleteIfExists(building);
                return new BuildResult(null, "the test double cannot be built: " + problem);
            }
            Files.move(building, library, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return new BuildResult(library, null);
        } catch (IOException e) {
            return new BuildResult(null, "the test double cannot be built: " + e.getMessage());
        }
    }

    /** The C compiler: {@code $CC}, else gcc. */
    static String compiler() {
        String cc = System.getenv("CC");
        return cc != null && !cc.isBlank() ? cc : "gcc";
    }

    /** Runs a command; null on success, else what went wrong (its output included). */
    static String run(List<String> cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return cmd.getFirst() + " did not finish within 120 s";
            }
            return p.exitValue() == 0 ? null : cmd.getFirst() + " exited with " + p.exitValue() + ": " + output.strip();
        } catch (IOException e) {
            return "cannot run " + cmd.getFirst() + " (" + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }
}
