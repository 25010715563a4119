package io.refshare.exceptions;

/**
 * Bytes from outside this process (a descriptor, a file header, a frame, a name) that are
 * malformed, truncated, out of range or hostile. Nothing is opened or changed on their behalf.
 */
public class InvalidDataException extends RefshareException {
    public InvalidDataException(String message) {
        super(message);
    }

    public InvalidDataException(String message, Throwable cause) {
        super(message, cause);
    }
}
