package io.refshare.conformance;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Descriptor bytes assembled field by field with no validation at all, following the byte
 * table of docs/protocol.md §7.1: how the malformed fixtures are made (a real encoder
 * refuses to write them). Every field is public and mutable; {@link #build()} lays them out,
 * computing lengths and the total from the parts unless they were overridden.
 * {@link FixtureGenerator} checks that, for every valid fixture, this builder and the real
 * encoder produce the same bytes, so the two cannot drift apart.
 */
final class RawDescriptor {
    int magic = 'R' | 'F' << 8 | 'S' << 16 | 'D' << 24;
    int version = 2;
    int flags = -1; // -1: derived from the parts present
    long totalLength = -1; // -1: the size of what build() lays out
    int backend = 1;
    int dtype;
    int rank = -1; // -1: shape.length
    int segmentNameLength = -1; // -1: the name's byte length
    int counterFileNameLength = -1;
    byte[] reserved = new byte[3];
    int slot;
    long segmentSize;
    long offset;
    long length;
    long storageOffset;
    long senderPid = 4242;
    long senderStartTicks = 123456;
    byte[] memoryHandle; // null: absent
    byte[] eventHandle; // null: absent
    long[] shape; // null: no tensor
    long[] strides;
    byte[] segmentName = bytes("refshare-seg-00000000000000000000000000000000");
    byte[] counterFileName = bytes("refshare-cnt-00000000000000000000000000000000");
    /** Bytes appended after the layout (trailing garbage). */
    byte[] trailing = new byte[0];

    static byte[] bytes(String ascii) {
        return ascii.getBytes(StandardCharsets.ISO_8859_1);
    }

    int effectiveFlags() {
        if (flags >= 0) {
            return flags;
        }
        return (shape != null ? 1 : 0) | (eventHandle != null ? 2 : 0) | (memoryHandle != null ? 4 : 0);
    }

    byte[] build() {
        int r = shape != null ? shape.length : 0;
        int size = 72 + (memoryHandle != null ? memoryHandle.length : 0) + (eventHandle != null ? eventHandle.length : 0)
                + 16 * r + segmentName.length + counterFileName.length + trailing.length;
        ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0, magic);
        b.putShort(4, (short) version);
        b.putShort(6, (short) effectiveFlags());
        b.putInt(8, (int) (totalLength >= 0 ? totalLength : size - trailing.length));
        b.put(12, (byte) backend);
        b.put(13, (byte) dtype);
        b.put(14, (byte) (rank >= 0 ? rank : r));
        b.put(15, (byte) (segmentNameLength >= 0 ? segmentNameLength : segmentName.length));
        b.put(16, (byte) (counterFileNameLength >= 0 ? counterFileNameLength : counterFileName.length));
        b.put(17, reserved, 0, 3);
        b.putInt(20, slot);
        b.putLong(24, segmentSize);
        b.putLong(32, offset);
        b.putLong(40, length);
        b.putLong(48, storageOffset);
        b.putLong(56, senderPid);
        b.putLong(64, senderStartTicks);
        b.position(72);
        if (memoryHandle != null) {
            b.put(memoryHandle);
        }
        if (eventHandle != null) {
            b.put(eventHandle);
        }
        for (int i = 0; i < r; i++) {
            b.putLong(shape[i]);
        }
        for (int i = 0; i < r; i++) {
            b.putLong(strides[i]);
        }
        b.put(segmentName);
        b.put(counterFileName);
        b.put(trailing);
        return b.array();
    }
}
