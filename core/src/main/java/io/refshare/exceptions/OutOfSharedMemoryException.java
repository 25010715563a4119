package io.refshare.exceptions;

/**
 * An allocation that could not be satisfied: the configured cap is reached, or the shared
 * memory directory has no space left. The process is unharmed (space is reserved when a
 * file is created, so a full directory never becomes a SIGBUS later).
 */
public class OutOfSharedMemoryException extends RefshareException {
    /**
     * An exception naming the allocation that failed and the limit it met.
     *
     * @param message the detail message
     */
    public OutOfSharedMemoryException(String message) {
        super(message);
    }

    /**
     * An exception naming the allocation that failed, with the system's failure underneath
     * (no space left on the device, say).
     *
     * @param message the detail message
     * @param cause   the underlying failure, or null when there is none
     */
    public OutOfSharedMemoryException(String message, Throwable cause) {
        super(message, cause);
    }
}
