package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;
import io.refshare.Tensor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * One "host" of {@link OneLoopPerProcessTest}, many bridge sides in one process:
 * {@code DIR OWN_IP PEER_IP SECRET ROUNDS}. Both hosts run it at once. A steady receiver and a
 * steady sender (to the other host's steady receiver) stream tensors the whole time, while
 * every round opens two more receivers and two more senders (to the other host's round
 * receivers), sends through them, and closes them all again. After the rounds the steady
 * stream ends and one more round runs alone (the loop is started afresh). Prints
 * {@code round R ok}, {@code steady sent=N received=M connects=C unconfirmed=U accepted=A},
 * {@code ucx-threads max=T} and {@code bye}; a failed check prints {@code error ...} and exits 1.
 */
public final class ManyBridgeSidesMain {
    private static final int STEADY_PORT = 13600;
    private static final int ROUND_PORTS = 13610;
    private static final int SIDES_PER_ROUND = 2;
    private static final int PER_ROUND_SIDE = 5;
    /** Inline and rendezvous tensors alike, so that both kinds are in flight when other sides close. */
    private static final long[] SIZES = {1024, 256 << 10};
    private static final long STEADY_TAG = 1_000_000;

    private final Refshare rs;
    private final String ownIp;
    private final String peerIp;
    private final BridgeSecret secret;
    private int maxLoopThreads;

    private ManyBridgeSidesMain(Refshare rs, String ownIp, String peerIp, BridgeSecret secret) {
        this.rs = rs;
        this.ownIp = ownIp;
        this.peerIp = peerIp;
        this.secret = secret;
    }

    public static void main(String[] a) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(a[0])))) {
            new ManyBridgeSidesMain(rs, a[1], a[2], BridgeSecret.read(Path.of(a[3]))).run(Integer.parseInt(a[4]));
        } catch (Throwable t) {
            System.out.println("error " + t);
            t.printStackTrace();
            System.exit(1);
        }
        System.out.println("bye");
    }

    private void run(int rounds) throws Exception {
        try (ShareQueue steadyIn = rs.createQueue(64)) {
            BridgeReceiver steadyReceiver = listen(STEADY_PORT, steadyIn);
            RemoteQueue steadyOut = connect(STEADY_PORT);
            AtomicLong sent = new AtomicLong();
            AtomicLong received = new AtomicLong();
            Thread producer = Thread.ofPlatform().start(() -> stream(steadyOut, sent));
            Thread consumer = Thread.ofPlatform().start(() -> take(steadyIn, received, steadyReceiver));
            for (int r = 0; r < rounds; r++) {
                round(r);
            }
            producer.interrupt();
            producer.join();
            steadyOut.close(Duration.ofSeconds(20));
            // the other host's steady sender ends its stream once all it sent is delivered
            await(() -> steadyReceiver.stats().endsOfStream() == 1, "the other host's steady stream to end");
            consumer.join(20_000);
            RemoteQueue.Stats out = steadyOut.stats();
            BridgeReceiver.Stats in = steadyReceiver.stats();
            countLoopThreads();
            steadyReceiver.close();
            System.out.println("steady sent=" + sent.get() + " received=" + received.get() + " connects="
                    + out.connects() + " unconfirmed=" + out.unconfirmed() + " accepted=" + in.peersAccepted());
        }
        // nothing holds the loop now: this round starts it afresh
        round(rounds);
        System.out.println("ucx-threads max=" + maxLoopThreads + " now=" + loopThreads());
    }

    /** Two receivers and two senders open alongside the steady ones, carry their tensors, and close. */
    private void round(int r) throws Exception {
        List<ShareQueue> queues = new ArrayList<>();
        List<BridgeReceiver> receivers = new ArrayList<>();
        List<RemoteQueue> senders = new ArrayList<>();
        for (int s = 0; s < SIDES_PER_ROUND; s++) {
            ShareQueue q = rs.createQueue(PER_ROUND_SIDE);
            queues.add(q);
            receivers.add(listen(ROUND_PORTS + r * SIDES_PER_ROUND + s, q));
        }
        for (int s = 0; s < SIDES_PER_ROUND; s++) {
            senders.add(connect(ROUND_PORTS + r * SIDES_PER_ROUND + s));
        }
        countLoopThreads();
        for (int s = 0; s < SIDES_PER_ROUND; s++) {
            for (int i = 0; i < PER_ROUND_SIDE; i++) {
                try (Tensor t = rs.allocateBytes(SIZES[i % SIZES.length])) {
                    fill(t.data(), tag(r, s, i));
                    senders.get(s).put(t);
                }
            }
        }
        for (int s = 0; s < SIDES_PER_ROUND; s++) {
            for (int i = 0; i < PER_ROUND_SIDE; i++) {
                try (Tensor t = queues.get(s).poll(30, TimeUnit.SECONDS)) {
                    check(t != null, "round " + r + " side " + s + ": tensor " + i + " did not arrive");
                    check(t.data().byteSize() == SIZES[i % SIZES.length] && matches(t.data(), tag(r, s, i)),
                            "round " + r + " side " + s + ": tensor " + i + " differs");
                }
            }
        }
        for (RemoteQueue q : senders) {
            q.close(Duration.ofSeconds(20));
            RemoteQueue.Stats st = q.stats();
            check(st.delivered() == PER_ROUND_SIDE && st.unconfirmed() == 0 && st.connects() == 1,
                    "round " + r + ": a sender ended with " + st);
        }
        // the other host's senders have ended their streams (all delivered) before their receivers close
        for (BridgeReceiver rec : receivers) {
            await(() -> rec.stats().endsOfStream() == 1, "round " + r + ": the other host's sender to end");
            rec.close();
        }
        for (ShareQueue q : queues) {
            q.close();
        }
        System.out.println("round " + r + " ok");
    }

    private BridgeReceiver listen(int port, ShareQueue into) {
        return BridgeReceiver.listen(rs, into, new InetSocketAddress(ownIp, port), secret, 4);
    }

    /** The other host may not listen yet: the sender tries again by itself until it does. */
    private RemoteQueue connect(int port) {
        return RemoteQueue.connect(new InetSocketAddress(peerIp, port), secret, 4, Duration.ofSeconds(30));
    }

    private void stream(RemoteQueue out, AtomicLong sent) {
        try {
            for (long i = 0; ; i++) {
                try (Tensor t = rs.allocateBytes(SIZES[(int) (i % SIZES.length)])) {
                    fill(t.data(), STEADY_TAG + i);
                    out.put(t);
                }
                sent.incrementAndGet();
                Thread.sleep(2);
            }
        } catch (InterruptedException e) {
            // the rounds are over
        }
    }

    /** Takes the other host's steady stream and checks it arrives whole and in order, until it ended. */
    private void take(ShareQueue in, AtomicLong received, BridgeReceiver from) {
        try {
            while (true) {
                Tensor t = in.poll(50, TimeUnit.MILLISECONDS);
                if (t == null) {
                    if (from.stats().endsOfStream() > 0 && received.get() == from.stats().delivered()) {
                        return;
                    }
                    continue;
                }
                try (t) {
                    long i = received.get();
                    check(t.data().byteSize() == SIZES[(int) (i % SIZES.length)] && matches(t.data(), STEADY_TAG + i),
                            "steady tensor " + i + " is not the one sent " + i + "th");
                }
                received.incrementAndGet();
            }
        } catch (io.refshare.exceptions.QueueClosedException e) {
            // the main thread failed and closed the queue: its error is the one to report
        } catch (Throwable e) {
            System.out.println("error steady consumer: " + e);
            System.exit(1);
        }
    }

    private static long tag(int round, int side, int i) {
        return (round * 10L + side) * 100 + i;
    }

    private void countLoopThreads() {
        maxLoopThreads = Math.max(maxLoopThreads, loopThreads());
    }

    private static int loopThreads() {
        return (int) Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("refshare-ucx") && t.isAlive()).count();
    }

    private static void fill(MemorySegment s, long tag) {
        for (long w = 0; w < s.byteSize() / 8; w++) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, w * 8, tag * 0x9E3779B97F4A7C15L + w);
        }
    }

    private static boolean matches(MemorySegment s, long tag) {
        for (long w = 0; w < s.byteSize() / 8; w++) {
            if (s.get(ValueLayout.JAVA_LONG_UNALIGNED, w * 8) != tag * 0x9E3779B97F4A7C15L + w) {
                return false;
            }
        }
        return true;
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static void await(BooleanSupplier done, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!done.getAsBoolean()) {
            check(System.nanoTime() - deadline < 0, "waited 20 s for " + what);
            Thread.sleep(5);
        }
    }
}
