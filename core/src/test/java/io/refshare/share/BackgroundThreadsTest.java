package io.refshare.share;

import io.refshare.Refshare;
import io.refshare.testing.BackgroundThreads;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The background threads of a {@code Refshare} (collector, housekeeper) against what other code does to them. */
class BackgroundThreadsTest {
    private static final Path TASKS = Path.of("/proc/self/task");

    /**
     * An interrupt means nothing to them: they go on sleeping between rounds. A parked thread
     * whose interrupt status stays set returns at once, every time, so without clearing it each
     * of them spun on a whole CPU for good. Their CPU time is read from {@code /proc}.
     */
    @Test
    void anInterruptDoesNotMakeThemSpin() throws Exception {
        Set<Thread> threadsBefore = new HashSet<>(Thread.getAllStackTraces().keySet());
        Set<Path> tasksBefore = tasks();
        try (TempShm shm = new TempShm(); Refshare rs = Refshare.open(shm.config())) {
            List<Thread> background = Thread.getAllStackTraces().keySet().stream()
                    .filter(t -> !threadsBefore.contains(t) && BackgroundThreads.NAMES.contains(t.getName()))
                    .toList();
            List<Path> backgroundTasks = tasks().stream()
                    .filter(t -> !tasksBefore.contains(t) && isBackgroundTask(comm(t)))
                    .toList();
            assertEquals(2, background.size(), "this instance's collector and housekeeper: " + background);
            assertEquals(2, backgroundTasks.size(), "their tasks: " + backgroundTasks);
            for (int round = 0; round < 3; round++) {
                long before = cpuTicks(backgroundTasks);
                background.forEach(Thread::interrupt);
                Thread.sleep(500);
                long used = cpuTicks(backgroundTasks) - before;
                // two spinning threads used 57 ticks of 10 ms in these 500 ms on two busy CPUs; sleeping ones one or two
                assertTrue(used < 20, "the two used " + used + " ticks of CPU in the 500 ms after an interrupt");
            }
            rs.collect(); // still working
        }
    }

    /** A task name is the thread name cut to 15 characters. */
    private static boolean isBackgroundTask(String comm) {
        return !comm.isEmpty() && BackgroundThreads.NAMES.stream().anyMatch(name -> name.startsWith(comm));
    }

    private static Set<Path> tasks() throws IOException {
        try (Stream<Path> s = Files.list(TASKS)) {
            return new HashSet<>(s.toList());
        }
    }

    private static String comm(Path task) {
        try {
            return Files.readString(task.resolve("comm")).strip();
        } catch (IOException gone) {
            return "";
        }
    }

    /** User and system time of {@code tasks} together, in clock ticks ({@code /proc/<pid>/task/<tid>/stat} fields 14 and 15). */
    private static long cpuTicks(List<Path> tasks) throws IOException {
        long ticks = 0;
        for (Path t : tasks) {
            String stat = Files.readString(t.resolve("stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            ticks += Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // fields 14 and 15, counted after the name
        }
        return ticks;
    }
}
