package io.refshare.shm;

/**
 * A wait that a close must see through to its end whatever its thread's interrupt says (the
 * uses of a handle leaving, a background thread ending): waited for again after each
 * interrupt, which is set again on the way out for the caller's next wait to answer.
 */
public final class Uninterruptibly {
    /** A wait that throws on an interrupt, as {@link Thread#join()} does. */
    public interface Wait {
        void run() throws InterruptedException;
    }

    private Uninterruptibly() {
    }

    public static void await(Wait wait) {
        boolean interrupted = false;
        while (true) {
            try {
                wait.run();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // the exception cleared the flag: the next try waits
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
