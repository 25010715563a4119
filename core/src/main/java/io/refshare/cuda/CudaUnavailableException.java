package io.refshare.cuda;

import io.refshare.exceptions.RefshareException;

/**
 * CUDA cannot be used in this process: no driver library, a driver that cannot start, or
 * no such device. The message says which, plainly; host memory is unaffected.
 */
public final class CudaUnavailableException extends RefshareException {
    private static final long serialVersionUID = 1L;

    /**
     * CUDA is unusable for the reason {@code message} gives.
     *
     * @param message what is missing or refused, and what to do about it
     */
    public CudaUnavailableException(String message) {
        super(message);
    }

    /**
     * CUDA is unusable for the reason {@code message} gives, found through {@code cause}.
     *
     * @param message what is missing or refused, and what to do about it
     * @param cause   the failure that showed it (a failed library load, say)
     */
    public CudaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
