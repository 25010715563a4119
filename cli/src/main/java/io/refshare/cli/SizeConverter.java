package io.refshare.cli;

import picocli.CommandLine;

import java.util.Locale;

/** "4096", "64KiB", "1MiB", "2GiB" (also KB/MB/GB and K/M/G, all binary) to bytes. */
final class SizeConverter implements CommandLine.ITypeConverter<Long> {
    @Override
    public Long convert(String value) {
        String v = value.trim().toUpperCase(Locale.ROOT);
        long unit = 1;
        for (String[] u : new String[][]{{"KIB", "KB", "K"}, {"MIB", "MB", "M"}, {"GIB", "GB", "G"}}) {
            unit <<= 10;
            for (String suffix : u) {
                if (v.endsWith(suffix)) {
                    return Math.multiplyExact(parse(v.substring(0, v.length() - suffix.length()), value), unit);
                }
            }
        }
        return parse(v.endsWith("B") ? v.substring(0, v.length() - 1) : v, value);
    }

    private static long parse(String number, String original) {
        try {
            long n = Long.parseLong(number.trim());
            if (n <= 0) {
                throw new CommandLine.TypeConversionException("size must be positive: '" + original + "'");
            }
            return n;
        } catch (NumberFormatException e) {
            throw new CommandLine.TypeConversionException("not a size: '" + original + "' (try 4096, 64KiB, 1MiB)");
        }
    }
}
