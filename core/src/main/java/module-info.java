/**
 * refshare: tensors and buffers shared between processes on one host, zero-copy, with
 * cross-process reference counting.
 *
 * <p>Start at {@link io.refshare.Refshare}: it allocates {@link io.refshare.Tensor}s in shared
 * memory, shares and receives them, and creates and opens {@link io.refshare.ShareQueue}s and
 * {@link io.refshare.SharedHolder}s. Element types, shapes and devices are values in
 * {@code io.refshare.tensor}; every failure refshare reports is in
 * {@code io.refshare.exceptions}; figures for monitoring are in {@code io.refshare.stats};
 * {@link io.refshare.Refshare#cuda()} and {@code io.refshare.cuda} (its settings and errors)
 * are the CUDA side.
 *
 * <p>refshare calls the C library (and, for device memory, the CUDA driver) through the
 * foreign function API, so the JVM must let this module use native access:
 * {@code --enable-native-access=io.refshare} on the module path,
 * {@code --enable-native-access=ALL-UNNAMED} on the class path (or
 * {@code Enable-Native-Access: ALL-UNNAMED} in an executable jar's manifest).
 *
 * <p>The other packages are the engine (shared-file layouts, counters, queues' rings,
 * allocators, the CUDA bindings) and are not exported; the command-line tool, which reads
 * every shared file, gets the inspection and file packages.
 */
@SuppressWarnings("module") // the CLI is not compiled with this module: its jar names itself io.refshare.cli
module io.refshare {
    requires jdk.jfr;

    exports io.refshare;
    exports io.refshare.exceptions;
    exports io.refshare.stats;
    exports io.refshare.tensor;
    exports io.refshare.cuda;

    exports io.refshare.inspect to io.refshare.cli;
    exports io.refshare.shm to io.refshare.cli;
}
