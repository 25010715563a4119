package io.refshare.exceptions;

/**
 * An allocation that could not be satisfied: the configured cap is reached, or the shared
 * memory directory has no space left. The process is unharmed (space is reserved when a
 * file is created, so a full directory never becomes a SIGBUS later).
 */
public class OutOfSharedMemoryException extends RefshareException {
    public OutOfSharedMemoryException(String message) {
        super(message);
    }

    public OutOfSharedMemoryException(String message, Throwable cause) {
        super(message, cause);
    }
}
