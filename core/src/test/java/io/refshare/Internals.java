package io.refshare;

import io.refshare.channel.QueueStats;
import io.refshare.cuda.driver.CudaSharing;
import io.refshare.share.Sharing;
import io.refshare.wire.Descriptor;

/**
 * The package-private parts of the top floor that tests in other packages reach for: the
 * engine under a {@link Refshare}, descriptors before encoding, a queue's full figures.
 */
@SuppressWarnings("exports") // engine types, for the tests inside the module
public final class Internals {
    private Internals() {
    }

    public static Sharing sharing(Refshare rs) {
        return rs.sharing();
    }

    public static Descriptor shareDescriptor(Refshare rs, Tensor tensor) {
        return rs.shareDescriptor(tensor);
    }

    public static Tensor receive(Refshare rs, Descriptor descriptor) {
        return rs.receive(descriptor);
    }

    /** The CUDA side's engine under {@link Refshare#cuda()} (loads the driver). */
    public static CudaSharing cudaSharing(Refshare rs) {
        rs.cuda();
        return (CudaSharing) rs.sharing().device();
    }

    public static io.refshare.share.Storage storage(Tensor tensor) {
        return tensor.storage();
    }

    public static QueueStats stats(ShareQueue queue) {
        return queue.stats();
    }
}
