package io.refshare.cli;

import io.refshare.harness.ShmOptions;
import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.ucx.BridgeReceiver;
import io.refshare.ucx.BridgeSecret;
import io.refshare.ucx.RemoteQueue;
import io.refshare.ucx.SendingBridge;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * {@code refshare bridge send|receive}: a local queue on one host feeding a queue on another,
 * over UCX (docs/hosts.md). The receiving side listens and creates (or opens) its queue; the
 * sending side forwards a local queue to it. Both print a status line every few seconds.
 */
@Command(name = "bridge", mixinStandardHelpOptions = true,
        description = {"Across hosts over UCX: forward a local queue to a queue on another host.",
                "Start 'bridge receive' on the receiving host, then 'bridge send' on the sending host;",
                "both need the same secret file (mode 0600). See docs/hosts.md."},
        subcommands = {BridgeCommand.Receive.class, BridgeCommand.Send.class})
final class BridgeCommand implements Runnable {
    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    static InetSocketAddress address(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("expected HOST:PORT, not " + hostPort);
        }
        return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    /**
     * Ctrl-C (or SIGTERM) for a command: {@link #await()} returns when it comes, and the JVM
     * waits (at most 15 s) for {@link #cleanedUp()} so the command's closes remove its files.
     */
    static final class Interrupt {
        private final CountDownLatch requested = new CountDownLatch(1);
        private final CountDownLatch done = new CountDownLatch(1);

        Interrupt(Runnable onRequest) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                onRequest.run();
                requested.countDown();
                try {
                    done.await(15, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        }

        void await() throws InterruptedException {
            requested.await();
        }

        void cleanedUp() {
            done.countDown();
        }
    }

    @Command(name = "receive", mixinStandardHelpOptions = true,
            description = "Listen for a sending bridge and put what it sends on a local queue.")
    static final class Receive implements java.util.concurrent.Callable<Integer> {
        @Mixin
        ShmOptions shm;

        @Option(names = "--listen", required = true, paramLabel = "IP:PORT",
                description = "where to listen: an IPv4 address of this host and a port (nothing else is opened)")
        String listen;

        @Option(names = "--secret", required = true, paramLabel = "FILE", description = "the shared secret (mode 0600)")
        Path secret;

        @Option(names = "--queue", paramLabel = "NAME", description = "put on this existing queue (default: create one)")
        String queue;

        @Option(names = "--capacity", defaultValue = "64", description = "capacity of the queue created (default: ${DEFAULT-VALUE})")
        int capacity;

        @Option(names = "--window", defaultValue = "16",
                description = "offers a sender may have unanswered (default: ${DEFAULT-VALUE})")
        int window;

        @Override
        public Integer call() throws Exception {
            BridgeSecret s = BridgeSecret.read(secret);
            Interrupt interrupt = new Interrupt(() -> { });
            try (Refshare rs = Refshare.open(shm.config());
                 ShareQueue q = queue == null ? rs.createQueue(capacity) : rs.openQueue(queue);
                 BridgeReceiver r = BridgeReceiver.listen(rs, q, address(listen), s, window);
                 ScheduledExecutorService status = Executors.newSingleThreadScheduledExecutor()) {
                System.out.println("receiving on " + r.address() + " into queue " + q.name());
                status.scheduleAtFixedRate(() -> {
                    var st = r.stats();
                    System.out.println("received " + st.received() + ", delivered " + st.delivered() + ", senders "
                            + st.peersAccepted() + ", refused " + st.peersRefused()
                            + (st.lastError() == null ? "" : ", last: " + st.lastError()));
                }, 5, 5, TimeUnit.SECONDS);
                interrupt.await();
            } finally {
                interrupt.cleanedUp();
            }
            return 0;
        }
    }

    @Command(name = "send", mixinStandardHelpOptions = true,
            description = "Forward a local queue to a receiving bridge on another host, until its stream ends.")
    static final class Send implements java.util.concurrent.Callable<Integer> {
        @Mixin
        ShmOptions shm;

        @Parameters(paramLabel = "QUEUE", description = "the local queue to forward")
        String queue;

        @Option(names = "--to", required = true, paramLabel = "IP:PORT", description = "the receiving bridge")
        String to;

        @Option(names = "--secret", required = true, paramLabel = "FILE", description = "the shared secret (mode 0600)")
        Path secret;

        @Option(names = "--window", defaultValue = "16",
                description = "tensors held for the remote side at most (default: ${DEFAULT-VALUE})")
        int window;

        @Override
        public Integer call() throws Exception {
            BridgeSecret s = BridgeSecret.read(secret);
            SendingBridge[] running = new SendingBridge[1];
            Interrupt interrupt = new Interrupt(() -> {
                if (running[0] != null) {
                    running[0].stop();
                }
            });
            try (Refshare rs = Refshare.open(shm.config());
                 ShareQueue q = rs.openQueue(queue);
                 ScheduledExecutorService status = Executors.newSingleThreadScheduledExecutor()) {
                RemoteQueue remote = RemoteQueue.connect(address(to), s, window, Duration.ofSeconds(30));
                System.out.println("forwarding queue " + q.name() + " to " + remote.address());
                status.scheduleAtFixedRate(() -> {
                    var st = remote.stats();
                    System.out.println("offered " + st.offered() + ", delivered " + st.delivered() + ", unconfirmed "
                            + st.unconfirmed() + (st.lastError() == null ? "" : ", last: " + st.lastError()));
                }, 5, 5, TimeUnit.SECONDS);
                SendingBridge bridge = new SendingBridge(q, remote);
                running[0] = bridge;
                long n = bridge.run();
                bridge.finish(Duration.ofSeconds(30));
                var st = remote.stats();
                System.out.println("forwarded " + n + ": delivered " + st.delivered() + ", unconfirmed " + st.unconfirmed());
                return st.unconfirmed() == 0 ? 0 : 2;
            } finally {
                interrupt.cleanedUp();
            }
        }
    }
}
