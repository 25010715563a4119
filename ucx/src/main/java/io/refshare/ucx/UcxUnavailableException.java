package io.refshare.ucx;

/**
 * UCX cannot be used in this process: {@code libucp.so.0} is missing, too old (it lacks an
 * entry point or reports a version before 1.13), or refuses to start. Install Debian's
 * {@code libucx0} (or point {@value Ucp#LIBRARY_ENV} at a {@code libucp.so}).
 */
public final class UcxUnavailableException extends UcxException {
    public UcxUnavailableException(String message) {
        super(message);
    }

    public UcxUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
