package io.refshare.ucx.bench;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.ucx.BridgeReceiver;
import io.refshare.ucx.BridgeSecret;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The receiving host's side of the cross-host bench: {@code ucx DIR IP PORT SECRET} (a
 * bridge receiver and a consumer that takes and closes every tensor) or {@code socket IP PORT}
 * (reads framed bytes into its own buffer: the copy a socket makes). Messages flagged as
 * latency probes print {@code L nanos} (their one-way time: this machine's one monotonic
 * clock); the last message of a throughput run is acknowledged to the source. Ends when
 * stdin closes.
 */
public final class BenchSink {
    /** Tensors in flight: enough to keep a fast link busy while each waits for its rendezvous round trip. */
    static final int WINDOW = 16;
    static final int FLAG_PLAIN = 0;
    static final int FLAG_PROBE = 1;
    static final int FLAG_LAST = 3;

    public static void main(String[] args) throws Exception {
        if (args[0].equals("ucx")) {
            ucx(Path.of(args[1]), new InetSocketAddress(args[2], Integer.parseInt(args[3])), BridgeSecret.read(Path.of(args[4])));
        } else {
            socket(new InetSocketAddress(args[1], Integer.parseInt(args[2])));
        }
    }

    private static void ucx(Path dir, InetSocketAddress at, BridgeSecret secret) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir));
             ShareQueue q = rs.createQueue(64);
             BridgeReceiver _ = BridgeReceiver.listen(rs, q, at, secret, WINDOW)) {
            Thread consumer = Thread.ofPlatform().start(() -> {
                try {
                    while (true) {
                        Tensor t = q.poll(100, TimeUnit.MILLISECONDS);
                        if (t == null) {
                            continue;
                        }
                        try (t) {
                            long stamp = t.data().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                            if (t.data().get(ValueLayout.JAVA_BYTE, 8) == FLAG_PROBE) {
                                System.out.println("L " + (System.nanoTime() - stamp));
                            }
                        }
                    }
                } catch (InterruptedException | QueueClosedException e) {
                    // done
                }
            });
            System.out.println("ready");
            awaitStdinEnd();
            consumer.interrupt();
            consumer.join();
        }
    }

    private static void socket(InetSocketAddress at) throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(at);
            System.out.println("ready");
            Thread reader = Thread.ofPlatform().daemon(true).start(() -> {
                ByteBuffer header = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer body = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer ack = ByteBuffer.allocateDirect(1);
                while (true) {
                    try (SocketChannel c = server.accept()) {
                        c.setOption(StandardSocketOptions.TCP_NODELAY, true);
                        while (true) {
                            header.clear();
                            if (!readFully(c, header)) {
                                break;
                            }
                            long length = header.getLong(0);
                            long stamp = 0;
                            int flag = 0;
                            long left = length;
                            boolean first = true;
                            while (left > 0) {
                                body.clear().limit((int) Math.min(body.capacity(), left));
                                if (!readFully(c, body)) {
                                    return;
                                }
                                if (first) {
                                    stamp = body.getLong(0);
                                    flag = body.get(8);
                                    first = false;
                                }
                                left -= body.limit();
                            }
                            if (flag == FLAG_PROBE) {
                                System.out.println("L " + (System.nanoTime() - stamp));
                            } else if (flag == FLAG_LAST) {
                                ack.clear();
                                c.write(ack);
                            }
                        }
                    } catch (java.io.IOException e) {
                        return;
                    }
                }
            });
            awaitStdinEnd();
        }
    }

    static boolean readFully(SocketChannel c, ByteBuffer b) throws java.io.IOException {
        while (b.hasRemaining()) {
            if (c.read(b) < 0) {
                return false;
            }
        }
        return true;
    }

    private static void awaitStdinEnd() throws java.io.IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) {
            // nothing to do but wait
        }
    }
}
