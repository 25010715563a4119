package io.refshare.harness;


import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** Where the numbers were measured: they mean little without it. */
record MachineInfo(String cpu, int cores, String memory, String kernel, String jdk) {

    static MachineInfo detect() {
        List<String> cpuinfo = lines(Path.of("/proc/cpuinfo"));
        String cpu = field(cpuinfo, "model name");
        long kib = cpuinfoNumber(field(lines(Path.of("/proc/meminfo")), "MemTotal"));
        String kernel = lines(Path.of("/proc/sys/kernel/osrelease")).stream().findFirst()
                .orElse(System.getProperty("os.version"));
        String jdk = Runtime.version() + " (" + System.getProperty("java.vm.vendor", "?") + ", "
                + System.getProperty("java.vm.name", "?") + ")";
        return new MachineInfo(cpu == null ? System.getProperty("os.arch") : cpu,
                Runtime.getRuntime().availableProcessors(), kib > 0 ? ByteSize.label(kib * 1024) : "unknown",
                System.getProperty("os.name") + " " + kernel, jdk);
    }

    /** The 1, 5 and 15 minute load averages, or "unknown". */
    static String loadAverage() {
        String[] w = lines(Path.of("/proc/loadavg")).stream().findFirst().orElse("").split(" ");
        return w.length >= 3 ? w[0] + " " + w[1] + " " + w[2] : "unknown";
    }

    private static List<String> lines(Path p) {
        try {
            return Files.readAllLines(p);
        } catch (IOException | RuntimeException e) {
            return List.of(); // not Linux, or not readable: the fallbacks say less, but the run goes on
        }
    }

    private static String field(List<String> lines, String name) {
        for (String line : lines) {
            int colon = line.indexOf(':');
            if (colon > 0 && line.substring(0, colon).trim().equals(name)) {
                return line.substring(colon + 1).trim();
            }
        }
        return null;
    }

    private static long cpuinfoNumber(String value) {
        if (value == null) {
            return -1;
        }
        try {
            return Long.parseLong(value.replace("kB", "").trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
