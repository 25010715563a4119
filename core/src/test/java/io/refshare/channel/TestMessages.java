package io.refshare.channel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Self-checking test messages: producer id, sequence number and a payload whose length
 * and bytes follow from both, so a torn, mixed or misdelivered message is detected.
 */
final class TestMessages {
    private static final int HEADER = 12;

    private TestMessages() {
    }

    static byte[] encode(int producer, long sequence) {
        int extra = (int) ((sequence * 7 + producer) % 53);
        ByteBuffer b = ByteBuffer.allocate(HEADER + extra).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(producer).putLong(sequence);
        for (int i = 0; i < extra; i++) {
            b.put(patternByte(producer, sequence, i));
        }
        return b.array();
    }

    static int producer(byte[] message) {
        return ByteBuffer.wrap(check(message)).order(ByteOrder.LITTLE_ENDIAN).getInt(0);
    }

    static long sequence(byte[] message) {
        return ByteBuffer.wrap(check(message)).order(ByteOrder.LITTLE_ENDIAN).getLong(4);
    }

    /** Returns the message if it is exactly what {@link #encode} made, else throws. */
    static byte[] check(byte[] message) {
        if (message.length < HEADER) {
            throw new AssertionError("message of " + message.length + " bytes is too short");
        }
        ByteBuffer b = ByteBuffer.wrap(message).order(ByteOrder.LITTLE_ENDIAN);
        int producer = b.getInt(0);
        long sequence = b.getLong(4);
        int extra = (int) ((sequence * 7 + producer) % 53);
        if (producer < 0 || sequence < 0 || message.length != HEADER + extra) {
            throw new AssertionError("corrupt message: producer " + producer + ", sequence " + sequence + ", "
                    + message.length + " bytes");
        }
        for (int i = 0; i < extra; i++) {
            if (message[HEADER + i] != patternByte(producer, sequence, i)) {
                throw new AssertionError("corrupt payload byte " + i + " of message " + producer + "/" + sequence);
            }
        }
        return message;
    }

    private static byte patternByte(int producer, long sequence, int i) {
        return (byte) (producer * 31 + sequence * 13 + i);
    }
}
