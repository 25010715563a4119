package io.refshare.memory;

import io.refshare.exceptions.OutOfSharedMemoryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A shared-memory directory that runs out of space: a 5 MiB tmpfs mounted for the test. Space
 * is reserved when a segment is created, so running out is an exception at allocation and
 * never a SIGBUS when the memory is written later.
 */
class FullDirectoryTest {
    private static final long MIB = 1 << 20;

    private Path mountPoint;
    private boolean mounted;

    @BeforeEach
    void mountSmallTmpfs() throws Exception {
        mountPoint = Files.createTempDirectory(Path.of("/dev/shm"), "refshare-memory-full-");
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=5m,mode=0700", "tmpfs",
                mountPoint.toString()).redirectErrorStream(true).start();
        String output = new String(mount.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        mounted = mount.waitFor() == 0;
        Assumptions.assumeTrue(mounted, "mounting a 5 MiB tmpfs needs root (CAP_SYS_ADMIN); mount said: " + output);
    }

    @AfterEach
    void unmount() throws Exception {
        if (mounted) {
            Process umount = new ProcessBuilder("umount", mountPoint.toString()).redirectErrorStream(true).start();
            String output = new String(umount.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            assertEquals(0, umount.waitFor(), "umount " + mountPoint + ": " + output);
        }
        Files.deleteIfExists(mountPoint);
    }

    @Test
    void aFullDirectoryThrowsReleasesCachedSegmentsAndTheJvmLives() {
        // not closed: the unmount in @AfterEach removes the mount point
        TestShmDirectory dir = new TestShmDirectory(mountPoint);
        try (var allocator = new CachingAllocator(new HostBackend(dir.directory()))) {
            // 2 MiB cached + a new 4 MiB do not fit in 5 MiB: the cached segment is given back and creation retried
            allocator.free(allocator.allocate(2 * MIB));
            AllocatedBlock four = allocator.allocate(4 * MIB);
            assertEquals(1, allocator.stats().segmentReleases());
            assertEquals(1, dir.fileCount());
            four.memory().fill((byte) 1);

            // nothing left to give back: the full directory surfaces as an exception
            var large = assertThrows(OutOfSharedMemoryException.class, () -> allocator.allocate(2 * MIB));
            assertTrue(large.getMessage().contains("no space left"), large.getMessage());
            var small = assertThrows(OutOfSharedMemoryException.class, () -> allocator.allocate(64));
            assertTrue(small.getMessage().contains(dir.path().toString()), small.getMessage());
            assertEquals(1, dir.fileCount(), "a failed creation leaves no file behind");

            // still alive and usable: the held memory is intact and is reused for the next request
            assertEquals(1, four.memory().get(ValueLayout.JAVA_BYTE, 4 * MIB - 1));
            Segment segment = four.segment();
            allocator.free(four);
            AllocatedBlock reused = allocator.allocate(2 * MIB);
            assertSame(segment, reused.segment());
            reused.memory().fill((byte) 2);
        }
        assertEquals(0, dir.fileCount(), "close removes every segment file");
        dir.directory().releaseLifeLock(); // its open descriptor would keep the mount busy
    }
}
