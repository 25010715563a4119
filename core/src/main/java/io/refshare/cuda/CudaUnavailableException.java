package io.refshare.cuda;

import io.refshare.exceptions.RefshareException;

/**
 * CUDA cannot be used in this process: no driver library, a driver that cannot start, or
 * no such device. The message says which, plainly; host memory is unaffected.
 */
public final class CudaUnavailableException extends RefshareException {
    CudaUnavailableException(String message) {
        super(message);
    }

    CudaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
