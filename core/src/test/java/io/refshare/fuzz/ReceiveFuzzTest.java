package io.refshare.fuzz;

import io.refshare.Internals;
import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.refshare.Refshare;
import io.refshare.exceptions.RefshareException;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.channel.ShmQueue;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmKind;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.tensor.TensorLayout;
import io.refshare.testing.TempShm;
import io.refshare.wire.Descriptor;
import io.refshare.wire.DescriptorCodec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The receiving end of the transport, fed forged messages about real files: a producer
 * shares a real tensor, and the consumer is handed that message with fields changed
 * (other files of ours, files that do not exist, sizes, offsets and lengths beside the
 * truth, other tokens, other senders, other tensor layouts) or with bytes flipped. A
 * forgery is refused with a {@link RefshareException} that says why, and costs no count;
 * whatever is accepted maps only memory inside a real segment of ours and takes only a
 * token that was in flight. Then the same through a {@link ShareQueue}, with a hostile
 * process offering garbage beside the producer: every message is received or rejected,
 * and the queue serves on.
 */
class ReceiveFuzzTest {
    private static TempShm shm;
    private static ShmDirectory dir;
    private static Refshare producer;
    private static Refshare consumer;
    /** A third process's worth of files: the hostile peer's messages are its returned ones. */
    private static Refshare stranger;
    private static final Logger QUEUE_LOG = Logger.getLogger(ShareQueue.class.getName());

    @BeforeAll
    static void openBothSides() {
        shm = new TempShm();
        dir = shm.directory();
        // a few slots per counter file, so that files fill, retire and are replaced all the time
        producer = Refshare.open(shm.config().withSlotsPerCounterFile(3));
        consumer = Refshare.open(shm.config());
        stranger = Refshare.open(shm.config().withSlotsPerCounterFile(3));
        QUEUE_LOG.setLevel(Level.OFF); // each rejection is logged; millions of them are expected here
    }

    @AfterAll
    static void closeBothSides() {
        try {
            stranger.close();
            consumer.close();
            producer.close();
        } finally {
            shm.close();
        }
    }

    @FuzzTest(maxDuration = "2m")
    void forgedDescriptor(FuzzedDataProvider data) {
        try (Tensor t = producer.allocate(DType.INT32, data.consumeInt(1, 64))) {
            fill(t);
            Descriptor real = Internals.shareDescriptor(producer, t);
            Tensor received = null;
            try {
                if (data.consumeBoolean()) {
                    byte[] message = DescriptorCodec.encode(real);
                    int flips = data.consumeInt(1, 4);
                    for (int i = 0; i < flips; i++) {
                        message[data.consumeInt(0, message.length - 1)] ^= data.consumeByte();
                    }
                    received = consumer.receive(message);
                } else {
                    Descriptor forged = forge(real, data);
                    if (forged == null) {
                        return;
                    }
                    received = Internals.receive(consumer, forged);
                }
            } catch (RefshareException e) {
                Hostile.refused(e);
            } finally {
                try {
                    if (received != null) {
                        check(real, received);
                    }
                } finally {
                    if (received != null) {
                        received.close();
                    }
                    Internals.sharing(producer).cancel(real); // a refused message's token goes back
                }
            }
        }
    }

    /**
     * What was accepted took the one token in flight, the real one, and maps memory that
     * exists: its first and last bytes can be read (a mapping past the end of a file would
     * fault here).
     */
    private static void check(Descriptor real, Tensor received) {
        MemorySegment m = received.data();
        if (m.byteSize() > 0) {
            m.get(ValueLayout.JAVA_BYTE, 0);
            m.get(ValueLayout.JAVA_BYTE, m.byteSize() - 1);
        }
        assertFalse(Internals.sharing(producer).cancel(real), "accepted a forgery without taking the real token");
    }

    @FuzzTest(maxDuration = "2m")
    void hostileQueuePeer(FuzzedDataProvider data) throws InterruptedException {
        try (ShareQueue out = producer.createQueue(4);
             ShareQueue in = consumer.openQueue(out.name());
             ShmQueue hostile = ShmQueue.open(dir, out.name())) {
            int garbage = data.consumeInt(0, 3);
            for (int i = 0; i < garbage; i++) {
                byte[] message;
                if (data.consumeBoolean()) {
                    message = data.consumeBytes(DescriptorCodec.MAX_ENCODED_BYTES);
                } else {
                    // a message that was real once, its token returned, then bytes flipped (another
                    // sender's: a forged slot number in the producer's own file could rightly take
                    // the token of the producer's next message, which no receiver can tell apart)
                    try (Tensor old = stranger.allocate(DType.UINT8, 16)) {
                        message = stranger.share(old);
                        stranger.cancel(message);
                    }
                    int flips = data.consumeInt(0, 3);
                    for (int f = 0; f < flips; f++) {
                        message[data.consumeInt(0, message.length - 1)] ^= data.consumeByte();
                    }
                }
                assertTrue(hostile.offer(message), "room for hostile message " + i);
            }
            int[] expected;
            try (Tensor t = producer.allocate(DType.INT32, 8)) {
                expected = fill(t);
                out.put(t);
            }
            List<int[]> taken = new ArrayList<>();
            for (int i = 0; i <= garbage; i++) {
                Tensor r = in.poll(0, TimeUnit.NANOSECONDS);
                if (r == null) {
                    break;
                }
                try (r) {
                    taken.add(r.data().toArray(ValueLayout.JAVA_INT));
                }
            }
            assertEquals(garbage + 1, taken.size() + in.rejected(), "every message received or rejected");
            assertFalse(taken.isEmpty(), "the real message was delivered, " + in.rejected() + " rejected");
            assertArrayEquals(expected, taken.get(taken.size() - 1), "the real tensor, intact");
            // and the queue serves on
            try (Tensor t = producer.allocate(DType.INT32, 8)) {
                expected = fill(t);
                out.put(t);
            }
            try (Tensor r = in.poll(10, TimeUnit.SECONDS)) {
                assertNotNull(r, "delivered after the garbage");
                assertArrayEquals(expected, r.data().toArray(ValueLayout.JAVA_INT));
            }
        } catch (QueueClosedException e) {
            throw new AssertionError("the queue closed under a hostile peer", e);
        }
    }

    /** The real descriptor with fields replaced; null when the forgery is not even a consistent descriptor. */
    private static Descriptor forge(Descriptor real, FuzzedDataProvider data) {
        String segment = name(real, data, real.segmentName());
        long segmentSize = number(data, real.segmentSize());
        long offset = number(data, real.offset());
        long length = number(data, real.length());
        String counters = name(real, data, real.counterFileName());
        int slot = (int) number(data, real.slot());
        TensorLayout tensor = real.tensor();
        switch (data.consumeInt(0, 3)) {
            case 1 -> tensor = null;
            case 2 -> {
                int rank = data.consumeInt(0, 3);
                long[] shape = new long[rank];
                long[] strides = new long[rank];
                for (int i = 0; i < rank; i++) {
                    shape[i] = data.consumeLong(0, 1 << 16);
                    strides[i] = data.consumeLong(-(1 << 16), 1 << 16);
                }
                try {
                    tensor = new TensorLayout(data.pickValue(DType.values()), shape, strides,
                            data.consumeLong(0, 1 << 16));
                } catch (IllegalArgumentException e) {
                    return null;
                }
            }
            default -> {
            }
        }
        long pid = number(data, real.senderPid());
        long start = number(data, real.senderStartTicks());
        try {
            return new Descriptor(real.backend(), segment, segmentSize, offset, length, real.memoryHandle(), counters,
                    slot, real.eventHandle(), tensor, pid, start);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /** The true name, another file of ours (of another kind, or gone), or a string. */
    private static String name(Descriptor real, FuzzedDataProvider data, String truth) {
        return switch (data.consumeInt(0, 5)) {
            case 1 -> real.segmentName();
            case 2 -> real.counterFileName();
            case 3 -> dir.newName(data.pickValue(ShmKind.values()));
            case 4 -> shm.files().isEmpty() ? truth : data.pickValue(shm.files());
            case 5 -> data.consumeAsciiString(140);
            default -> truth;
        };
    }

    /** The true value, one near it, a boundary, or anything. */
    private static long number(FuzzedDataProvider data, long truth) {
        return switch (data.consumeInt(0, 4)) {
            case 1 -> truth + data.consumeLong(-4097, 4097);
            case 2 -> data.pickValue(new Long[] {0L, 1L, 4095L, 4096L, (long) Integer.MAX_VALUE, Long.MAX_VALUE});
            case 3 -> data.consumeLong();
            default -> truth;
        };
    }

    private static int[] fill(Tensor t) {
        MemorySegment m = t.data();
        int[] values = new int[(int) (m.byteSize() / 4)];
        for (int i = 0; i < values.length; i++) {
            values[i] = 0x5EED0000 + i;
            m.setAtIndex(ValueLayout.JAVA_INT, i, values[i]);
        }
        return values;
    }
}
