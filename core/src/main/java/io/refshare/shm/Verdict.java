package io.refshare.shm;

/**
 * Whether a process named in a shared file is still running, as far as the kernel lets
 * this process know (see {@link LifeFile}). Only {@link #DEAD} permits acting on another
 * process's behalf (reclaiming its references, repairing its claims, removing its files);
 * {@link #UNKNOWN} is treated as alive by all of these, so a wrong answer can cost a leak,
 * never a use of freed memory.
 */
public enum Verdict {
    /** Running: its life lock is held, or /proc shows it with the same start time. */
    ALIVE,
    /** Gone, on the kernel's evidence: nobody holds the life lock of that identity. */
    DEAD,
    /** No evidence either way (another PID namespace without a life file, say). */
    UNKNOWN;

    /** True unless the process is known to be dead. */
    public boolean mayBeAlive() {
        return this != DEAD;
    }
}
