package io.refshare.fuzz;

import io.refshare.exceptions.RefshareException;
import io.refshare.shm.FileHeader;
import io.refshare.shm.ShmDirectory;
import io.refshare.shm.ShmFile;
import io.refshare.shm.ShmKind;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * What the fuzz tests share: planting files with bytes of the fuzzer's choosing, the way a
 * hostile process of the same user could, and the rule for what counts as a clean refusal.
 *
 * <p>A reader of outside bytes may refuse them only with a {@link RefshareException} (most
 * often its subclass {@code InvalidDataException}) that says what is wrong. Every other
 * exception, an error, a hang or a crash of the JVM is a finding; Jazzer reports all of
 * them, so the fuzz tests catch exactly the documented refusals and let the rest escape.
 */
final class Hostile {
    private Hostile() {
    }

    /** Accepts a refusal only if it explains itself. */
    static void refused(RefshareException e) {
        if (e.getMessage() == null || e.getMessage().isBlank()) {
            throw new AssertionError("refused without saying why", e);
        }
    }

    /**
     * Creates a file of {@code kind} through the directory (as refshare itself would) and
     * makes its content exactly {@code content}: shorter than any header, garbage, or a
     * valid image with a few bytes changed. Returns its name.
     */
    static String plant(ShmDirectory dir, ShmKind kind, byte[] content) {
        String name;
        // create writes a header naming this process; the content replaces it, and a
        // content shorter than a header is cut to its length
        try (ShmFile f = dir.create(kind, Math.max(FileHeader.LENGTH, content.length))) {
            MemorySegment.copy(content, 0, f.segment(), ValueLayout.JAVA_BYTE, 0, content.length);
            name = f.name();
        }
        if (content.length < FileHeader.LENGTH) {
            truncate(dir.path().resolve(name), content.length);
        }
        return name;
    }

    /** Writes {@code bytes} into an existing file at {@code offset} (through the page cache every mapping shares). */
    static void poke(Path file, long offset, byte[] bytes) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) {
                ch.write(b, offset + b.position());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void truncate(Path file, long size) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ch.truncate(size);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static byte[] read(Path file) {
        try {
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void delete(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Removes everything a fuzz input left in {@code dir} (files, links, directories one level deep). */
    static void empty(Path dir) {
        try (var files = Files.list(dir)) {
            for (Path p : files.toList()) {
                if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                    empty(p);
                }
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code length} bytes of {@code data} starting at {@code offset}, zero-padded where {@code data} ends. */
    static byte[] slice(byte[] data, int offset, int length) {
        byte[] out = new byte[length];
        if (offset < data.length) {
            System.arraycopy(data, offset, out, 0, Math.min(length, data.length - offset));
        }
        return out;
    }
}
