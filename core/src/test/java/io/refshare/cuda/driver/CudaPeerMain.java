package io.refshare.cuda.driver;

import io.refshare.Internals;

import io.refshare.stats.CudaStats;
import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.Tensor;
import io.refshare.tensor.DType;
import io.refshare.tensor.Device;
import io.refshare.testing.Patterns;
import io.refshare.wire.Backend;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A consumer (and forwarder, or producer) process for the CUDA tests. Args: shm directory, driver
 * library ("-" for the default), "double" or "real". Commands on stdin, answers on stdout:
 * <pre>
 *   MAKE id seed bytes host|cuda  allocate a tensor, write seed's pattern, keep -> MADE id
 *   RECV id seed hex   receive, verify every byte (device: copied to the host), keep -> OK id | BAD id detail
 *   TAKE id hex        receive only, keep, on another thread; with the double, answers once that
 *                      receive polls the sender's unfinished event  -> WAITING id notReadyPolls (-1: real driver)
 *   JOINTAKE id        wait for that receive (or HTAKE's acquire)         -> TAKEN id | ERROR ...
 *   VERIFY id seed     verify a kept tensor again                          -> OK id | BAD id detail
 *   FORWARD id         share a kept tensor (received or made) onward       -> FORWARDED hex
 *   REFUSE hex         try to receive, expecting a refusal                 -> REFUSED message | ACCEPTED
 *   CLOSE id           close a kept tensor                                 -> CLOSED id
 *   CLOSEASYNC id      close a kept tensor on another thread, answer at once -> CLOSING id
 *   JOIN id            wait for that close to end                          -> CLOSED id | ERROR ...
 *   SET key value      a setting of the test double (nothing against a real driver) -> SET
 *   HOLD               block this process's stream from now on (the double: its pause; a real
 *                      driver: a wait for a device word nobody writes, until it exits) -> HELD
 *   RESUME             end HOLD's pause (the double only)                 -> RESUMED
 *   QUEUE id seed      queue a write of seed's pattern into a kept device tensor on this
 *                      process's stream (held by HOLD: it stays queued)   -> QUEUED id
 *   MAPPED host|cuda   segments of other processes mapped/opened now       -> MAPPED n
 *   CUDA               -> CUDA openSegments ipcOpens ipcCloses eventWaits
 *   LIVE               references to this process's memory counted now     -> LIVE n
 *   DOUBLE name...     test double counters (-1 each against a real driver) -> DOUBLE v...
 *   HOPEN name         open a shared holder (one at a time)                 -> HOPENED
 *   HGET id seed       acquire the holder's current version, verify every byte, keep -> OK id | BAD id detail
 *   HTAKE id           acquire only, keep, on another thread; answers as TAKE -> WAITING id notReadyPolls
 *   HCLOSE             close the holder handle        -> HCLOSED retiredHere anomalies
 *   EXIT               close everything (kept tensors, holder, refshare)   -> BYE
 * </pre>
 * A failing command answers {@code ERROR <exception>} instead of leaving the test waiting.
 */
public final class CudaPeerMain {
    static void run(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        if (!args[1].equals("-")) {
            System.setProperty(CudaDriver.LIBRARY_PROPERTY, args[1]);
        }
        TestDouble testDouble = args[2].equals("double") ? TestDouble.load(args[1]) : null;
        if (testDouble != null) {
            testDouble.configure(dir, -1, -1);
        }
        HexFormat hex = HexFormat.of();
        Map<String, Tensor> kept = new HashMap<>();
        Map<String, Future<Void>> closing = new HashMap<>();
        Map<String, Future<Tensor>> taking = new HashMap<>();
        ExecutorService background = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().factory());
        Arena queuedBytes = Arena.ofShared(); // QUEUE's sources, read when the stream gets there
        SharedHolder holder = null;
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(dir));
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.split(" ");
                String answer;
                try {
                    answer = switch (w[0]) {
                        case "MAKE" -> {
                            Tensor t = rs.allocate(Device.parse(w[4]), DType.UINT8, Long.parseLong(w[3]));
                            kept.put(w[1], t);
                            CudaAcrossProcessesTest.fill(rs, t, Long.parseLong(w[2]));
                            yield "MADE " + w[1];
                        }
                        case "RECV" -> {
                            Tensor t = rs.receive(hex.parseHex(w[3]));
                            kept.put(w[1], t);
                            yield verify(rs, w[1], t, Long.parseLong(w[2]));
                        }
                        case "TAKE" -> {
                            byte[] message = hex.parseHex(w[2]);
                            Future<Tensor> receive = background.submit(() -> rs.receive(message));
                            taking.put(w[1], receive);
                            yield "WAITING " + w[1] + " " + awaitPolling(testDouble, receive);
                        }
                        case "JOINTAKE" -> {
                            kept.put(w[1], joined(taking.remove(w[1])));
                            yield "TAKEN " + w[1];
                        }
                        case "VERIFY" -> verify(rs, w[1], kept.get(w[1]), Long.parseLong(w[2]));
                        case "FORWARD" -> "FORWARDED " + hex.formatHex(rs.share(kept.get(w[1])));
                        case "REFUSE" -> {
                            try (Tensor t = rs.receive(hex.parseHex(w[1]))) {
                                yield "ACCEPTED " + t;
                            } catch (RuntimeException e) {
                                yield "REFUSED " + e.getMessage();
                            }
                        }
                        case "CLOSE" -> {
                            kept.remove(w[1]).close();
                            yield "CLOSED " + w[1];
                        }
                        case "CLOSEASYNC" -> {
                            Tensor t = kept.remove(w[1]);
                            closing.put(w[1], background.submit(() -> {
                                t.close();
                                return null;
                            }));
                            yield "CLOSING " + w[1];
                        }
                        case "JOIN" -> {
                            joined(closing.remove(w[1]));
                            yield "CLOSED " + w[1];
                        }
                        case "SET" -> {
                            if (testDouble != null) {
                                testDouble.set(w[1], Long.parseLong(w[2]));
                            }
                            yield "SET";
                        }
                        case "HOLD" -> {
                            if (testDouble != null) {
                                testDouble.pause(true);
                            } else {
                                StreamHold.forever(rs.cuda().stream());
                            }
                            yield "HELD";
                        }
                        case "RESUME" -> {
                            if (testDouble == null) {
                                throw new IllegalStateException("a real driver's HOLD lasts until this process exits");
                            }
                            testDouble.pause(false);
                            yield "RESUMED";
                        }
                        case "QUEUE" -> {
                            Tensor t = kept.get(w[1]);
                            MemorySegment bytes = queuedBytes.allocate(t.layout().byteSpan());
                            Patterns.fill(bytes, Long.parseLong(w[2]));
                            rs.cuda().copyFromHostAsync(bytes, t);
                            yield "QUEUED " + w[1];
                        }
                        case "MAPPED" -> "MAPPED " + (w[1].equals("host") ? rs.stats().mappedSegments()
                                : rs.cuda().stats().openSegments());
                        case "CUDA" -> {
                            CudaStats s = rs.cuda().stats();
                            yield "CUDA " + s.openSegments() + " " + s.ipcOpens() + " " + s.ipcCloses() + " "
                                    + s.eventWaits();
                        }
                        case "LIVE" -> "LIVE " + Internals.sharing(rs).liveCounts();
                        case "DOUBLE" -> {
                            StringBuilder b = new StringBuilder("DOUBLE");
                            for (int i = 1; i < w.length; i++) {
                                b.append(' ').append(testDouble == null ? -1 : testDouble.counter(w[i]));
                            }
                            yield b.toString();
                        }
                        case "HOPEN" -> {
                            holder = rs.openHolder(w[1]);
                            yield "HOPENED";
                        }
                        case "HGET" -> {
                            Tensor t = acquired(holder);
                            kept.put(w[1], t);
                            yield verify(rs, w[1], t, Long.parseLong(w[2]));
                        }
                        case "HTAKE" -> {
                            SharedHolder h = holder;
                            Future<Tensor> acquire = background.submit(() -> acquired(h));
                            taking.put(w[1], acquire);
                            yield "WAITING " + w[1] + " " + awaitPolling(testDouble, acquire);
                        }
                        case "HCLOSE" -> {
                            SharedHolder.Stats s = holder.stats();
                            holder.close();
                            yield "HCLOSED " + s.retiredHere() + " " + s.anomalies();
                        }
                        case "EXIT" -> {
                            kept.values().forEach(Tensor::close);
                            kept.clear();
                            if (holder != null) {
                                holder.close();
                            }
                            rs.close();
                            yield "BYE";
                        }
                        default -> "ERROR unknown command " + w[0];
                    };
                } catch (RuntimeException e) {
                    e.printStackTrace();
                    answer = "ERROR " + e;
                }
                System.out.println(answer);
                System.out.flush();
                if (answer.equals("BYE")) {
                    return;
                }
            }
        }
    }

    /** What {@code pending} gave, once it ends; its failure rethrown as it was. */
    private static <T> T joined(Future<T> pending) throws InterruptedException {
        try {
            return pending.get();
        } catch (ExecutionException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        }
    }

    /** The holder's current version; a test publishes before asking, so none is a failure. */
    private static Tensor acquired(SharedHolder holder) {
        Tensor t = holder.acquire();
        if (t == null) {
            throw new IllegalStateException("the holder is empty");
        }
        return t;
    }

    /**
     * With the double: waits until the receive or acquire {@code pending} polls an unfinished event
     * (or ends); answers the polls that found it not ready. Against a real driver: -1 at once.
     */
    private static long awaitPolling(TestDouble testDouble, Future<Tensor> pending) throws InterruptedException {
        if (testDouble == null) {
            return -1;
        }
        long deadline = System.nanoTime() + 30_000_000_000L; // a bound against hanging, not a timing check
        while (testDouble.counter("eventNotReady") == 0 && !pending.isDone() && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        return testDouble.counter("eventNotReady");
    }

    static String verify(Refshare rs, String id, Tensor t, long seed) {
        long bad;
        if (Internals.storage(t).backend() == Backend.CUDA) {
            try (Arena arena = Arena.ofConfined()) {
                bad = Patterns.firstMismatch(rs.cuda().copyToHost(t, arena), seed);
            }
        } else {
            bad = Patterns.firstMismatch(t.data(), seed);
        }
        return bad < 0 ? "OK " + id : "BAD " + id + " first mismatch at byte " + bad;
    }
}
