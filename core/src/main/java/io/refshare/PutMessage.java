package io.refshare;

import io.refshare.channel.Outgoing;
import io.refshare.share.Sharing;
import io.refshare.share.Storage;
import io.refshare.tensor.TensorLayout;
import io.refshare.wire.Backend;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import io.refshare.wire.HostEncoder;

import java.lang.foreign.MemorySegment;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A message counted for a {@link ShareQueue#put} or {@link ShareQueue#putAll}, written
 * straight into the queue's cell; one never queued is cancelled. Host memory is written from
 * its storage and token ({@link Host}); device memory from a descriptor that carries the
 * message's own event ({@link Described}). A thread's puts reuse its {@link Host}, and its
 * batches of host tensors its {@link HostBatch}, so that neither allocates anything here,
 * whatever the compiler's escape analysis decides.
 */
sealed interface PutMessage extends Outgoing permits PutMessage.Host, PutMessage.Described {
    /** Gives back the reference the message counted: it will never be queued. */
    void cancel();

    /** The message is queued or cancelled: it lets go of what it referred to. */
    void done();

    /** Counts one reference to {@code tensor}'s memory for a message: in this thread's {@link Host}, or a new {@link Described} for device memory. */
    static PutMessage of(Refshare refshare, Tensor tensor) {
        return of(refshare, tensor, Host.OF_THIS_THREAD.get());
    }

    private static PutMessage of(Refshare refshare, Tensor tensor, Host host) {
        return tensor.storage().backend() == Backend.HOST ? host.share(refshare, tensor)
                : new Described(refshare.sharing(), refshare.shareDescriptor(tensor));
    }

    /**
     * {@link #of} of every tensor of a batch, in order. Host tensors take their tokens together
     * ({@link Sharing#shareHostAll}: the counter pool's lock once for the batch, a tensor put
     * several times in a row held once) into this thread's {@link HostBatch}; a batch with
     * device memory in it is shared tensor by tensor. Nothing is counted when it throws.
     */
    static List<? extends PutMessage> ofAll(Refshare refshare, List<Tensor> tensors) {
        boolean allHost = true;
        for (Tensor t : tensors) {
            allHost &= Objects.requireNonNull(t, "tensor").storage().backend() == Backend.HOST;
        }
        if (allHost) {
            HostBatch batch = tensors.size() <= HostBatch.KEPT ? HostBatch.OF_THIS_THREAD.get() : new HostBatch();
            return batch.share(refshare.sharing(), tensors);
        }
        List<PutMessage> messages = new ArrayList<>(tensors.size());
        HostEncoder encoder = new HostEncoder(); // the batch's host messages are written one after another
        try {
            for (Tensor t : tensors) {
                messages.add(of(refshare, t, new Host(encoder)));
            }
        } catch (RuntimeException e) {
            messages.forEach(PutMessage::cancel);
            throw e;
        }
        return messages;
    }

    /** Host memory: written from the storage and the token, with no descriptor object in between. */
    final class Host implements PutMessage {
        private static final ThreadLocal<Host> OF_THIS_THREAD = ThreadLocal.withInitial(() -> new Host(new HostEncoder()));
        /** Its thread's: a batch's messages share their batch's. */
        private final HostEncoder encoder;
        private Sharing sharing;
        private Storage storage;
        private TensorLayout layout;
        private long token;

        private Host(HostEncoder encoder) {
            this.encoder = encoder;
        }

        private Host share(Refshare refshare, Tensor tensor) {
            Sharing s = refshare.sharing();
            Storage st = tensor.storage();
            return of(s, st, tensor.layout(), s.shareHost(st, tensor.layout()));
        }

        /** The message of a token already handed out for {@code st}. */
        private Host of(Sharing s, Storage st, TensorLayout l, long handedOut) {
            sharing = s;
            storage = st;
            layout = l;
            token = handedOut;
            return this;
        }

        @Override
        public int byteSize() {
            return sharing.encodedSize(storage, layout, token);
        }

        @Override
        public void writeTo(MemorySegment cell, long offset) {
            sharing.encode(storage, layout, token, cell, offset, encoder);
        }

        @Override
        public void cancel() {
            sharing.cancel(storage, token);
        }

        @Override
        public void done() {
            sharing = null;
            storage = null;
            layout = null;
        }
    }

    /**
     * The messages of one {@code putAll} of host tensors, with the arrays that shared them: one
     * per thread, reused batch after batch (a thread puts one batch at a time), so that once its
     * arrays are as long as the batches a batch allocates nothing here. Between batches it holds
     * no storage or layout: {@link #share} drops what it gathered, and each message lets go of
     * its own at {@link Host#done}. A batch longer than {@value #KEPT} gets one of its own, so
     * that one huge batch leaves no huge arrays behind in its thread.
     */
    final class HostBatch extends AbstractList<Host> {
        private static final int KEPT = 1024;
        private static final ThreadLocal<HostBatch> OF_THIS_THREAD = ThreadLocal.withInitial(HostBatch::new);
        private Storage[] storages = new Storage[0];
        private TensorLayout[] layouts = new TensorLayout[0];
        private int[] tags = new int[0];
        private long[] tokens = new long[0];
        private Host[] messages = new Host[0];
        private final HostEncoder encoder = new HostEncoder();
        private int size;

        private HostBatch() {
        }

        /** Counts one reference for each of {@code tensors} (all host memory) and answers their messages. */
        private HostBatch share(Sharing sharing, List<Tensor> tensors) {
            int n = tensors.size();
            size = 0;
            if (messages.length < n) {
                grow(n);
            }
            try {
                int i = 0;
                for (Tensor t : tensors) {
                    storages[i] = t.storage();
                    layouts[i] = t.layout();
                    i++;
                }
                sharing.shareHostAll(storages, layouts, tags, tokens, n);
                for (int m = 0; m < n; m++) {
                    messages[m].of(sharing, storages[m], layouts[m], tokens[m]);
                }
                size = n;
                return this;
            } finally {
                Arrays.fill(storages, 0, n, null);
                Arrays.fill(layouts, 0, n, null);
            }
        }

        private void grow(int n) {
            int length = Math.max(n, 2 * messages.length);
            storages = new Storage[length];
            layouts = new TensorLayout[length];
            tags = new int[length];
            tokens = new long[length];
            Host[] more = Arrays.copyOf(messages, length);
            for (int i = messages.length; i < length; i++) {
                more[i] = new Host(encoder);
            }
            messages = more;
        }

        @Override
        public Host get(int index) {
            return messages[Objects.checkIndex(index, size)];
        }

        @Override
        public int size() {
            return size;
        }
    }

    /** Device memory: its descriptor carries this message's own event. */
    record Described(Sharing sharing, Descriptor descriptor) implements PutMessage {
        @Override
        public int byteSize() {
            return DescriptorCodec.encodedSize(descriptor);
        }

        @Override
        public void writeTo(MemorySegment cell, long offset) {
            DescriptorCodec.encode(descriptor, cell, offset);
        }

        @Override
        public void cancel() {
            sharing.cancel(descriptor);
        }

        @Override
        public void done() {
            // immutable: nothing to let go of
        }
    }
}
