package io.refshare.harness;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The Python processes of the CLI's commands ({@code demo --python-consumers}, bench's
 * Java-Python rows): the checkout's peer scripts in {@code python/peers}, run with Debian's
 * {@code /usr/bin/python3} (the interpreter that takes the apt packages numpy, torch, cffi) and
 * {@code PYTHONPATH} set to the checkout's {@code python} folder, where the {@code refshare}
 * package is.
 */
public final class PythonPeers {
    /** The interpreter; {@code REFSHARE_PYTHON} may name another one that has the same packages. */
    public static final Path PYTHON = Path.of(System.getenv().getOrDefault("REFSHARE_PYTHON", "/usr/bin/python3"));

    private PythonPeers() {
    }

    /**
     * The {@code python} folder: {@code REFSHARE_PYTHON_ROOT} if set, else found above this
     * build's jar or classes (cli/target/... in a checkout), else above the working directory
     * (a module built alone takes this jar from the local Maven repository, outside the checkout).
     */
    public static Path packageRoot() throws IOException {
        String env = System.getenv("REFSHARE_PYTHON_ROOT");
        if (env != null) {
            return Path.of(env);
        }
        Path workingDirectory = Path.of(System.getProperty("user.dir"));
        Path here;
        try {
            here = Path.of(PythonPeers.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException | RuntimeException e) {
            here = workingDirectory;
        }
        for (Path start : new Path[] {here, workingDirectory}) {
            for (Path d = start.toAbsolutePath(); d != null; d = d.getParent()) {
                if (Files.isRegularFile(d.resolve("python/refshare/__init__.py"))) {
                    return d.resolve("python");
                }
            }
        }
        throw new IOException("the refshare Python package (python/refshare) was not found above " + here
                + " nor above the working directory " + workingDirectory
                + "; set REFSHARE_PYTHON_ROOT to the checkout's python folder");
    }

    /**
     * Why Python peers cannot run here, or null when {@link #PYTHON} imports refshare and
     * every module named.
     */
    public static String unavailable(String... modules) throws InterruptedException {
        if (!Files.isExecutable(PYTHON)) {
            return "no " + PYTHON;
        }
        Path root;
        try {
            root = packageRoot();
        } catch (IOException e) {
            return e.getMessage();
        }
        String imports = "import refshare" + (modules.length == 0 ? "" : ", " + String.join(", ", modules));
        try {
            Process p = command(root, List.of("-c", imports)).redirectErrorStream(true).start();
            byte[] output = p.getInputStream().readAllBytes();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return PYTHON + " took over 2 minutes to " + imports;
            }
            if (p.exitValue() != 0) {
                String text = new String(output).strip();
                String last = text.isEmpty() ? "exit code " + p.exitValue() : text.substring(text.lastIndexOf('\n') + 1);
                return PYTHON + " cannot " + imports + " (" + last + ")";
            }
            return null;
        } catch (IOException e) {
            return "cannot run " + PYTHON + ": " + e.getMessage();
        }
    }

    /** True when {@link #PYTHON} can import torch (the demo's consumers then alternate numpy and torch). */
    public static boolean hasTorch() throws InterruptedException {
        return unavailable("torch") == null;
    }

    /** Starts {@code python/peers/<script>} with {@code args}; its stderr goes to ours, its stdout is for us. */
    public static Process start(String script, String... args) throws IOException {
        Path root = packageRoot();
        List<String> words = new ArrayList<>();
        words.add(root.resolve("peers").resolve(script).toString());
        words.addAll(List.of(args));
        return command(root, words).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static ProcessBuilder command(Path root, List<String> args) {
        List<String> command = new ArrayList<>();
        command.add(PYTHON.toString());
        command.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.environment().put("PYTHONPATH", root.toString());
        pb.environment().put("PYTHONDONTWRITEBYTECODE", "1"); // nothing written into the checkout
        return pb;
    }
}
