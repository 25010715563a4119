package io.refshare.exceptions;

/**
 * A fixed resource is exhausted: one of a shared file (every peer entry of a counter file held
 * by live processes, say), or one of this process or machine (its open files, its mappings,
 * the kernel's memory, its device's memory). Nothing was consumed on its behalf: a message that met the limit while
 * being received is given back to its queue for a consumer that can take it, or for this one
 * once the limit is no longer reached. The message names the limit and how to raise it.
 */
public class ResourceLimitException extends RefshareException {
    /**
     * An exception naming the exhausted resource and how to raise its limit.
     *
     * @param message the detail message
     */
    public ResourceLimitException(String message) {
        super(message);
    }

    /**
     * An exception naming the exhausted resource, with the failure that reported it.
     *
     * @param message the detail message
     * @param cause   the underlying failure
     */
    public ResourceLimitException(String message, Throwable cause) {
        super(message, cause);
    }
}
