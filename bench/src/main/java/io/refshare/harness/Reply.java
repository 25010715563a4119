package io.refshare.harness;

import java.io.IOException;

/**
 * A consumer's {@code RESULT} line: the count of messages whose content was wrong, then
 * either its per-round read timestamps (ping-pong) or the start and end of its timed
 * stretch (streaming).
 */
record Reply(long bad, long[] numbers) {

    static Reply parse(String text) throws IOException {
        String[] w = text.isEmpty() ? new String[0] : text.split(" ");
        if (w.length < 1) {
            throw new IOException("the consumer process sent an empty result");
        }
        try {
            long[] numbers = new long[w.length - 1];
            for (int i = 1; i < w.length; i++) {
                numbers[i - 1] = Long.parseLong(w[i]);
            }
            return new Reply(Long.parseLong(w[0]), numbers);
        } catch (NumberFormatException e) {
            throw new IOException("the consumer process sent a malformed result: " + e.getMessage());
        }
    }

    long[] timestamps() {
        return numbers;
    }

    long elapsedNanos() throws IOException {
        if (numbers.length != 2 || numbers[1] <= numbers[0]) {
            throw new IOException("the consumer process sent a malformed streaming result");
        }
        return numbers[1] - numbers[0];
    }

    /** A benchmark of wrong data measures nothing: stop. */
    void requireNoneBad(String what) throws IOException {
        if (bad != 0) {
            throw new IOException(what + ": the consumer read wrong content in " + bad + " messages");
        }
    }
}
