package io.refshare.share;

/**
 * What a background thread of refshare survives. Everything short of a
 * {@link VirtualMachineError} is one file's or one task's failure, and the thread goes on
 * with the others. {@link InternalError} is the exception: the JVM reports a fault on a
 * mapping that another process truncated (an access past its new end) as one, although it
 * is a {@code VirtualMachineError}; it says nothing about the JVM, only about that file.
 * Other virtual machine errors are not a step's to handle: a full heap ends the round, and the
 * thread pauses and goes on ({@link BackgroundSteps#repeat}); anything else ends it.
 */
final class Failures {
    private Failures() {
    }

    /** Rethrows {@code t} unless a refshare thread should log it and carry on. */
    static void rethrowIfFatal(Throwable t) {
        if (t instanceof VirtualMachineError && !(t instanceof InternalError)) {
            throw (VirtualMachineError) t;
        }
    }
}
