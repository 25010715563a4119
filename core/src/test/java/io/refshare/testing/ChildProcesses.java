package io.refshare.testing;

import java.io.PrintWriter;
import java.util.concurrent.TimeUnit;

/** How a test ends a child process it talks to, whatever language runs in it: never one left behind. */
public final class ChildProcesses {
    private ChildProcesses() {
    }

    /** The exit code, waiting at most 60 s (then it is killed and the test fails). */
    public static int waitFor(Process process, String name) {
        try {
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                kill(process);
                throw new AssertionError(name + " did not exit within 60 s");
            }
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** SIGKILL: no cleanup of any kind in the process. */
    public static void kill(Process process) {
        // SIGKILL the descendants first: a wrapper's child (unshare's JVM) would otherwise see its
        // stdin close when the JDK closes the wrapper's streams right after killing it, and exit
        // cleanly before the kernel's parent-death signal arrives: a clean close, not a death
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
        try {
            process.waitFor(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Closes its stdin (the child's cue to finish) and gives it 10 s to exit before killing it. */
    public static void close(Process process, PrintWriter stdin) {
        stdin.close();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                kill(process);
            }
        } catch (InterruptedException e) {
            kill(process);
            Thread.currentThread().interrupt();
        }
    }
}
