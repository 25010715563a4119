package io.refshare.memory;

import io.refshare.shm.FileHeader;
import io.refshare.shm.ProcessIdentity;
import io.refshare.shm.ShmKind;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HostBackendTest {
    private final TestShmDirectory dir = new TestShmDirectory();

    @AfterEach
    void removeDirectory() {
        dir.close();
    }

    @Test
    void createsAnOwnerOnlySegmentFileThatAnotherMappingSeesAndFreeRemovesIt() throws Exception {
        HostBackend backend = new HostBackend(dir.directory());
        Segment segment = backend.create(2 << 20);

        assertEquals(2 << 20, segment.size());
        assertEquals(ShmKind.SEGMENT, dir.directory().kindOf(segment.name()));
        Path file = dir.directory().resolve(segment.name(), ShmKind.SEGMENT);
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
        assertEquals(HostBackend.HEADER_BYTES + (2 << 20), Files.size(file), "a header page, then the memory");
        assertEquals(ProcessIdentity.current(), FileHeader.read(file).owner(), "the header names the owner");

        segment.memory().set(ValueLayout.JAVA_LONG, 4096, 0x1234_5678_9abc_def0L);
        try (var consumer = dir.directory().open(segment.name(), ShmKind.SEGMENT, segment.exportSize())) {
            HostBackend.checkHeader(consumer.segment(), segment.name());
            assertEquals(0x1234_5678_9abc_def0L,
                    consumer.segment().get(ValueLayout.JAVA_LONG, segment.exportOffset() + 4096));
        }

        backend.free(segment);
        assertFalse(Files.exists(file));
        assertEquals(0, dir.fileCount());
    }

    @Test
    void accessAfterFreeThrowsInsteadOfTouchingUnmappedMemory() {
        HostBackend backend = new HostBackend(dir.directory(), false);
        Segment segment = backend.create(1 << 20);
        MemorySegment memory = segment.memory();
        backend.free(segment);
        assertThrows(IllegalStateException.class, () -> memory.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void refusesDoubleFreeAndForeignSegments() {
        HostBackend backend = new HostBackend(dir.directory());
        HostBackend other = new HostBackend(dir.directory());
        Segment segment = backend.create(1 << 20);

        var foreign = assertThrows(IllegalArgumentException.class, () -> other.free(segment));
        assertTrue(foreign.getMessage().contains("not created by this host backend"), foreign.getMessage());

        backend.free(segment);
        var twice = assertThrows(IllegalStateException.class, () -> backend.free(segment));
        assertTrue(twice.getMessage().contains("already freed"), twice.getMessage());
    }

    @Test
    void refusesNonPositiveSizes() {
        HostBackend backend = new HostBackend(dir.directory());
        assertThrows(IllegalArgumentException.class, () -> backend.create(0));
        assertEquals(0, dir.fileCount());
    }
}
