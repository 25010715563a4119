package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.ShareQueue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;

/**
 * One side of a bridge as a process of its own, for the two-host tests: {@code receive DIR
 * IP PORT SECRET CAPACITY WINDOW} creates a queue in DIR and prints {@code ready NAME};
 * {@code send DIR QUEUE IP PORT SECRET WINDOW} forwards that queue and prints {@code connected}.
 * Both print {@code stats ...} when asked by a line {@code stats} on stdin, and end cleanly
 * on {@code quit} or when stdin closes.
 */
public final class BridgeProcessMain {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[1]);
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir))) {
            if (args[0].equals("receive")) {
                receive(rs, args);
            } else {
                send(rs, args);
            }
        }
        System.out.println("bye");
        System.out.flush();
    }

    private static void receive(Refshare rs, String[] a) throws Exception {
        BridgeSecret secret = BridgeSecret.read(Path.of(a[4]));
        try (ShareQueue q = rs.createQueue(Integer.parseInt(a[5]));
             BridgeReceiver r = BridgeReceiver.listen(rs, q, new InetSocketAddress(a[2], Integer.parseInt(a[3])),
                     secret, Integer.parseInt(a[6]))) {
            System.out.println("ready " + q.name());
            System.out.flush();
            commands(() -> {
                var s = r.stats();
                var x = rs.stats();
                return "stats received=" + s.received() + " delivered=" + s.delivered() + " accepted="
                        + s.peersAccepted() + " refused=" + s.peersRefused() + " ends=" + s.endsOfStream()
                        + " limbo=" + x.limboBlocks() + " reclaimed=" + x.reclaimed() + " error=" + s.lastError();
            });
        }
    }

    private static void send(Refshare rs, String[] a) throws Exception {
        BridgeSecret secret = BridgeSecret.read(Path.of(a[5]));
        RemoteQueue remote;
        try {
            remote = RemoteQueue.connect(new InetSocketAddress(a[3], Integer.parseInt(a[4])), secret,
                    Integer.parseInt(a[6]), Duration.ofSeconds(10));
        } catch (UcxException e) {
            System.out.println("failed " + e.getMessage());
            System.out.flush();
            return;
        }
        try (ShareQueue q = rs.openQueue(a[2])) {
            SendingBridge bridge = new SendingBridge(q, remote);
            Thread pump = Thread.ofPlatform().start(() -> {
                try {
                    bridge.run();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            System.out.println("connected");
            System.out.flush();
            commands(() -> {
                var s = remote.stats();
                return "stats offered=" + s.offered() + " delivered=" + s.delivered() + " unconfirmed="
                        + s.unconfirmed() + " connects=" + s.connects() + " error=" + s.lastError();
            });
            bridge.stop();
            pump.join();
            bridge.finish(Duration.ofSeconds(10));
        }
    }

    private static void commands(java.util.function.Supplier<String> stats) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null && !line.equals("quit")) {
            if (line.equals("stats")) {
                System.out.println(stats.get());
                System.out.flush();
            }
        }
    }
}
