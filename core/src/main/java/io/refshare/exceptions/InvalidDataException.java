package io.refshare.exceptions;

/**
 * Bytes from outside this process (a descriptor, a file header, a frame, a name) that are
 * malformed, truncated, out of range or hostile. Nothing is opened or changed on their behalf.
 */
public class InvalidDataException extends RefshareException {
    /**
     * An exception naming what was wrong with the data and where it came from.
     *
     * @param message the detail message
     */
    public InvalidDataException(String message) {
        super(message);
    }

    /**
     * An exception naming what was wrong with the data, with the failure that showed it
     * (a fault on a truncated file, say).
     *
     * @param message the detail message
     * @param cause   the underlying failure, or null when there is none
     */
    public InvalidDataException(String message, Throwable cause) {
        super(message, cause);
    }
}
