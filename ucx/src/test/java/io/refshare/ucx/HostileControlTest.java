package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.tensor.TensorLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A receiving bridge faced with a peer that speaks UCX but not the protocol: raw frames
 * (the fuzz corpus, garbage, handshake steps out of order, forged proofs, and after a real
 * handshake offers larger than the host's memory, offers without their bytes, bytes out of
 * order or under another message, and messages only a receiver sends). Each is
 * refused with its reason, nothing is delivered, and an honest sender is served afterwards.
 * Loopback, in this JVM.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HostileControlTest {
    private static final BridgeSecret SECRET = BridgeSecret.of("the receiver's shared secret".getBytes());
    private static final InetSocketAddress ADDRESS = new InetSocketAddress("127.0.0.1", 13390);

    /** The receiving host's shared memory: an offer larger than this cannot be copied. */
    private static final long CAPACITY = 64L << 20;

    private Path dir;
    private Refshare rs;
    private ShareQueue queue;
    private BridgeReceiver receiver;
    private LoopUser raw;

    @BeforeEach
    void listen() throws Exception {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "rs-hostile-");
        rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir).withCapacityBytes(CAPACITY));
        queue = rs.createQueue(8);
        receiver = BridgeReceiver.listen(rs, queue, ADDRESS, SECRET, 4);
        // the hostile peer is a user of its own of the process's one UCX loop, as a second bridge side would be
        raw = LoopUser.open("hostile peer");
    }

    @AfterEach
    void close() throws Exception {
        raw.close(); // the raw peers' endpoints it still has; the receiver's are not its own
        receiver.close();
        queue.close();
        rs.close();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(f);
            }
        }
    }

    /** A UCX endpoint to the receiver that sends whatever it is given and collects what comes back. */
    private final class RawPeer implements UcxLoop.Endpoint {
        final LinkedBlockingQueue<byte[]> frames = new LinkedBlockingQueue<>();
        final CompletableFuture<String> error = new CompletableFuture<>();
        MemorySegment ep;

        RawPeer() throws Exception {
            CompletableFuture<Void> up = new CompletableFuture<>();
            raw.execute(() -> {
                ep = raw.connect(ADDRESS, MemorySegment.NULL, this);
                up.complete(null);
            });
            up.get(10, TimeUnit.SECONDS);
        }

        void send(byte[] frame) {
            raw.execute(() -> raw.send(ep, frame, status -> { }));
        }

        /** {@code frame} as the header of a message carrying {@code bytes} (inline). */
        void sendWithBytes(byte[] frame, int bytes) {
            MemorySegment data = Arena.ofAuto().allocate(Math.max(bytes, 1)).asSlice(0, bytes);
            raw.execute(() -> raw.sendData(ep, frame, data, true, status -> data.byteSize()));
        }

        BridgeMessage next() throws InterruptedException {
            byte[] f = frames.poll(10, TimeUnit.SECONDS);
            assertNotNull(f, "the receiver answered nothing");
            return ControlCodec.decode(f);
        }

        /** Does the handshake honestly (the hostile part comes after). */
        void authenticate() throws InterruptedException {
            byte[] cn = BridgeSecret.nonce();
            send(ControlCodec.encode(new BridgeMessage.Hello(cn)));
            BridgeMessage.Challenge c = assertInstanceOf(BridgeMessage.Challenge.class, next());
            send(ControlCodec.encode(new BridgeMessage.Proof(SECRET.clientProof(cn, c.serverNonce()))));
            assertInstanceOf(BridgeMessage.Welcome.class, next());
        }

        void close() {
            raw.execute(() -> raw.closeEndpoint(ep));
        }

        @Override
        public void onMessage(byte[] frame) {
            frames.add(frame);
        }

        @Override
        public void onData(byte[] header, MemorySegment data, long length, boolean rendezvous) {
            frames.add(header); // a receiver sends no bytes: the test sees the frame and fails on it
        }

        @Override
        public void onError(int status, String text) {
            error.complete(text);
        }
    }

    /**
     * The peer is told why ({@code REFUSED(reason)}), or, when the endpoint closed before the
     * refusal could leave (UCX may still be wiring a fresh connection up), at least
     * disconnected; the receiver's count of refusals is checked by the callers.
     */
    private void assertRefused(RawPeer p, int reason) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() - deadline < 0) {
            byte[] f = p.frames.poll(20, TimeUnit.MILLISECONDS);
            if (f != null) {
                BridgeMessage m = ControlCodec.decode(f);
                if (m instanceof BridgeMessage.Heartbeat) {
                    continue;
                }
                assertEquals(new BridgeMessage.Refused(reason), m);
                p.close();
                return;
            }
            if (p.error.isDone()) {
                return;
            }
        }
        throw new AssertionError("the receiver neither refused nor disconnected the peer within 10 s");
    }

    @Test
    void everyCorpusFrameAndGarbageBeforeTheHandshakeIsRefused() throws Exception {
        List<byte[]> hostile = new ArrayList<>();
        Path corpus = Path.of("src/test/resources/io/refshare/ucx/ControlCodecFuzzTestInputs/decode");
        try (Stream<Path> files = Files.list(corpus)) {
            for (Path f : files.sorted().toList()) {
                byte[] b = Files.readAllBytes(f);
                // anything but a hello is out of order here; a refusal is not hostile (the link just ends)
                if (b.length < 6 || b[5] != ControlCodec.HELLO && b[5] != ControlCodec.REFUSED) {
                    hostile.add(b);
                }
            }
        }
        hostile.add(new byte[]{1, 2, 3});
        hostile.add(new byte[ControlCodec.MAX_FRAME_BYTES]);
        long refusedBefore = receiver.stats().peersRefused();
        for (byte[] frame : hostile) {
            RawPeer p = new RawPeer();
            p.send(frame);
            try {
                assertRefused(p, BridgeMessage.Refused.BAD_MESSAGE);
            } catch (AssertionError e) {
                throw new AssertionError("frame " + java.util.HexFormat.of().formatHex(frame) + ": " + e.getMessage(), e);
            }
        }
        awaitRefused(refusedBefore + hostile.size());
        assertEquals(0, receiver.stats().received());
        honestSenderIsServed();
    }

    @Test
    void aForgedProofIsRefused() throws Exception {
        RawPeer p = new RawPeer();
        p.send(ControlCodec.encode(new BridgeMessage.Hello(BridgeSecret.nonce())));
        assertInstanceOf(BridgeMessage.Challenge.class, p.next());
        p.send(ControlCodec.encode(new BridgeMessage.Proof(new byte[ControlCodec.PROOF_BYTES])));
        assertRefused(p, BridgeMessage.Refused.BAD_SECRET);
        awaitRefused(1);
        assertEquals(0, receiver.stats().peersAccepted());
        honestSenderIsServed();
    }

    @Test
    void afterTheHandshakeUnusableOrMalformedOffersAndReceiverMessagesAreRefused() throws Exception {
        // more than this host's shared memory holds: refused before a byte is taken
        TensorLayout l = TensorLayout.contiguous(DType.UINT8, 2 * CAPACITY);
        RawPeer p = new RawPeer();
        p.authenticate();
        p.sendWithBytes(ControlCodec.encode(new BridgeMessage.Offer(1, l, 2 * CAPACITY, 0)), 64);
        assertRefused(p, BridgeMessage.Refused.UNUSABLE_OFFER);

        RawPeer q = new RawPeer();
        q.authenticate();
        q.send(ControlCodec.encode(new BridgeMessage.Delivered(5)));
        assertRefused(q, BridgeMessage.Refused.BAD_MESSAGE);

        RawPeer r = new RawPeer();
        r.authenticate();
        r.send(ControlCodec.encode(new BridgeMessage.Hello(BridgeSecret.nonce())));
        assertRefused(r, BridgeMessage.Refused.BAD_MESSAGE);

        // an offer as a plain control message (its bytes missing), bytes under a heartbeat's
        // frame, a tensor's second chunk without its first, more bytes than the offer says
        TensorLayout small = TensorLayout.contiguous(DType.UINT8, 64);
        RawPeer s1 = new RawPeer();
        s1.authenticate();
        s1.send(ControlCodec.encode(new BridgeMessage.Offer(1, small, 64, 0)));
        assertRefused(s1, BridgeMessage.Refused.BAD_MESSAGE);
        RawPeer s2 = new RawPeer();
        s2.authenticate();
        s2.sendWithBytes(ControlCodec.encode(new BridgeMessage.Heartbeat()), 64);
        assertRefused(s2, BridgeMessage.Refused.BAD_MESSAGE);
        RawPeer s3 = new RawPeer();
        s3.authenticate();
        s3.sendWithBytes(ControlCodec.encode(new BridgeMessage.Offer(1, small, 64, 32)), 32);
        assertRefused(s3, BridgeMessage.Refused.BAD_MESSAGE);
        RawPeer s4 = new RawPeer();
        s4.authenticate();
        s4.sendWithBytes(ControlCodec.encode(new BridgeMessage.Offer(1, small, 64, 0)), 65);
        assertRefused(s4, BridgeMessage.Refused.BAD_MESSAGE);

        awaitRefused(7);
        assertEquals(0, receiver.stats().delivered());
        honestSenderIsServed();
    }

    private void awaitRefused(long n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (receiver.stats().peersRefused() < n && System.nanoTime() - deadline < 0) {
            Thread.sleep(10);
        }
        assertEquals(n, receiver.stats().peersRefused());
    }

    private void honestSenderIsServed() throws Exception {
        try (RemoteQueue q = RemoteQueue.connect(ADDRESS, SECRET, 4, Duration.ofSeconds(10));
             Tensor t = rs.allocate(DType.INT64, 128)) {
            t.data().fill((byte) 0x5A);
            q.put(t);
            try (Tensor got = queue.poll(10, TimeUnit.SECONDS)) {
                assertNotNull(got);
                assertEquals(-1L, got.data().mismatch(t.data()));
            }
        }
        assertTrue(receiver.stats().delivered() >= 1);
    }
}
