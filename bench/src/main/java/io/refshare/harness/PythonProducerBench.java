package io.refshare.harness;

import java.io.IOException;

/**
 * The Python -> Java rows: the Python peer (python/peers/bench_peer.py) produces, the Java
 * consumer process ({@link BenchPeer}) consumes, with the same shapes, payloads and timestamps
 * as {@link RefshareBench}: the Python producer creates the queues and notes its send and
 * acknowledgement times, the Java consumer its read times, unchanged from the Java rows.
 * This process only directs the two.
 */
final class PythonProducerBench {
    private final PeerProcess python;
    private final PeerProcess java;

    PythonProducerBench(PeerProcess python, PeerProcess java) {
        this.python = python;
        this.java = java;
    }

    LatencyStats pingPong(long size, Mode mode, int warmup, int rounds) throws IOException, InterruptedException {
        int total = warmup + rounds;
        python.send("PY_PINGPONG", Long.toString(size), mode.name(), Integer.toString(total));
        String[] queues = python.await("QUEUES").split(" ");
        if (queues.length != 2) {
            throw new IOException("the Python process named " + queues.length + " queues, expected ping and pong");
        }
        java.send(BenchPeer.RS_PINGPONG, queues[0], queues[1], Integer.toString(total), mode.name());
        java.await(BenchPeer.READY);
        python.send("GO");
        long[] sendAt = numbers(python.await("SENT"));
        long[] ackAt = numbers(python.await("ACKED"));
        Reply reply = Reply.parse(java.await(BenchPeer.RESULT));
        reply.requireNoneBad("python->java " + mode.label() + " ping-pong");
        return LatencyStats.of(sendAt, reply.timestamps(), ackAt, warmup);
    }

    ThroughputStats stream(long size, Mode mode, int warmup, int messages, int window)
            throws IOException, InterruptedException {
        int total = warmup + messages;
        python.send("PY_STREAM", Long.toString(size), mode.name(), Integer.toString(total), Integer.toString(window));
        String queue = python.await("QUEUE");
        java.send(BenchPeer.RS_STREAM, queue, Integer.toString(total), Integer.toString(warmup), mode.name());
        java.await(BenchPeer.READY);
        python.send("GO");
        Reply reply = Reply.parse(java.await(BenchPeer.RESULT));
        python.await("PUT");
        python.send("CLOSE"); // only now: the consumer has taken every message
        python.await("CLOSED");
        reply.requireNoneBad("python->java " + mode.label() + " streaming");
        return new ThroughputStats(messages, messages * size, reply.elapsedNanos(), window + " messages");
    }

    private static long[] numbers(String text) throws IOException {
        String[] w = text.isEmpty() ? new String[0] : text.split(" ");
        long[] v = new long[w.length];
        try {
            for (int i = 0; i < w.length; i++) {
                v[i] = Long.parseLong(w[i]);
            }
        } catch (NumberFormatException e) {
            throw new IOException("the Python process sent a malformed timestamp: " + e.getMessage());
        }
        return v;
    }
}
