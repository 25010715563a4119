package io.refshare.ucx;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Many bridge sides in one process share its one UCX worker: two processes on two "hosts"
 * ({@link ManyBridgeSidesMain}) each keep a steady receiver and sender streaming to each other
 * while, round after round, two more receivers and two more senders open, carry tensors
 * (inline and rendezvous) and close. With a worker per side this aborted the process now and
 * then (UCX 1.13's async handler table, when one worker's closed socket fd was reused by
 * another's). Checked: each process ran one UCX loop thread at most, every round's tensors
 * arrived byte-exact, and the steady links never noticed the others closing (one connection
 * each, every tensor delivered in order, none unconfirmed); the loop starts afresh after its
 * last user closed.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class OneLoopPerProcessTest {
    private static final int ROUNDS = 8;

    @Test
    void receiversAndSendersOpenAndCloseBesideSteadyLinks() throws Exception {
        try (TwoHosts h = TwoHosts.create()) {
            Path secret = h.secret("ok", "the secret both hosts share");
            BridgeChild a = h.start(h.nsA, ManyBridgeSidesMain.class, h.shmA.toString(), TwoHosts.IP_A,
                    TwoHosts.IP_B, secret.toString(), Integer.toString(ROUNDS));
            BridgeChild b = h.start(h.nsB, ManyBridgeSidesMain.class, h.shmB.toString(), TwoHosts.IP_B,
                    TwoHosts.IP_A, secret.toString(), Integer.toString(ROUNDS));
            for (int r = 0; r < ROUNDS; r++) {
                assertEquals("round " + r + " ok", next(a, "round "));
                assertEquals("round " + r + " ok", next(b, "round "));
            }
            Map<String, Long> steadyA = fields(next(a, "steady "));
            Map<String, Long> steadyB = fields(next(b, "steady "));
            for (Map<String, Long> s : java.util.List.of(steadyA, steadyB)) {
                assertTrue(s.get("sent") > 0, "the steady stream ran: " + s);
                assertEquals(1, s.get("connects"), "the steady sender never lost its link: " + s);
                assertEquals(0, s.get("unconfirmed"), "the steady sender: " + s);
                assertEquals(1, s.get("accepted"), "the steady receiver served one connection: " + s);
            }
            assertEquals(steadyA.get("sent"), steadyB.get("received"), "A to B: every tensor, in order");
            assertEquals(steadyB.get("sent"), steadyA.get("received"), "B to A: every tensor, in order");
            assertEquals("round " + ROUNDS + " ok", next(a, "round "), "a round after the loop stopped");
            assertEquals("round " + ROUNDS + " ok", next(b, "round "), "a round after the loop stopped");
            for (BridgeChild c : java.util.List.of(a, b)) {
                assertEquals("ucx-threads max=1 now=0", next(c, "ucx-threads "));
                assertEquals("bye", next(c, "bye"));
                assertEquals(0, c.quit(30));
            }
            for (Path dir : java.util.List.of(h.shmA, h.shmB)) {
                try (Stream<Path> files = Files.list(dir)) {
                    assertEquals(java.util.List.of(), files.toList(), "left behind in " + dir);
                }
            }
        }
    }

    /** The next line starting with {@code prefix}; a line reporting a failed check fails the test with it. */
    private static String next(BridgeChild c, String prefix) throws InterruptedException {
        while (true) {
            String l = c.line(60);
            if (l.startsWith("error") || l.equals("<eof>")) {
                throw new AssertionError(c.name + ": " + l);
            }
            if (l.startsWith(prefix)) {
                return l;
            }
        }
    }

    /** {@code steady k=v k=v ...} as a map. */
    private static Map<String, Long> fields(String line) {
        Map<String, Long> m = new HashMap<>();
        for (String kv : line.substring(line.indexOf(' ') + 1).split(" ")) {
            int eq = kv.indexOf('=');
            m.put(kv.substring(0, eq), Long.parseLong(kv.substring(eq + 1)));
        }
        return m;
    }
}
