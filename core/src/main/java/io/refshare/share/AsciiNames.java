package io.refshare.share;

import java.nio.charset.StandardCharsets;

/**
 * The bytes of a segment name as messages carry it and range tags hash it (ASCII), for a fresh
 * block's sent-block record or its receiver's tag. A stream of fresh blocks is block after block
 * of one segment, so the name encoded last is remembered, by identity (a segment hands out one
 * name object, and so does a receiver's decode memo), instead of encoded for every block (a
 * fresh 1 KiB tensor's put and take allocated about 700 bytes with that, 570 without, in
 * {@code QueueBenchmark.freshPutTakeReadClose}). A process keeps one for the blocks it sends
 * and one for those it receives: with one for both, a relay that receives fresh blocks and
 * sends its own encoded a name for every message.
 *
 * <p>Read and written without a lock: the entry is immutable, and a racing miss only encodes
 * again. The bytes are shared and never written.
 */
final class AsciiNames {
    private NameBytes last;

    byte[] of(String segment) {
        NameBytes known = last;
        if (known != null && known.name == segment) {
            return known.ascii;
        }
        byte[] ascii = segment.getBytes(StandardCharsets.US_ASCII);
        last = new NameBytes(segment, ascii);
        return ascii;
    }

    private record NameBytes(String name, byte[] ascii) {
    }
}
