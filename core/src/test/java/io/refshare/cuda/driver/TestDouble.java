package io.refshare.cuda.driver;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The test-only entry points of the CUDA test double (not part of CUDA): where its files go,
 * how many devices and how much memory it pretends to have, holding its streams, and its
 * per-process call and live-object counters. Loading the same library path as
 * {@link CudaDriver#system()} reaches the same instance of it (the loader shares it).
 */
final class TestDouble {
    private static final Linker LINKER = Linker.nativeLinker();

    private final MethodHandle configure;
    private final MethodHandle counter;
    private final MethodHandle pause;
    private final MethodHandle pending;
    private final MethodHandle set;
    private final MethodHandle fail;
    private final MethodHandle lastViolation;

    private TestDouble(SymbolLookup lib) {
        configure = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_configure"),
                FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_LONG));
        counter = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_counter"),
                FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        pause = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_pause"),
                FunctionDescriptor.ofVoid(JAVA_INT));
        pending = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_pending"),
                FunctionDescriptor.of(JAVA_LONG));
        set = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_set"),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        fail = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_fail"),
                FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT));
        lastViolation = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_last_violation"),
                FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));
    }

    static TestDouble load(String library) {
        return new TestDouble(SymbolLookup.libraryLookup(library, Arena.global()));
    }

    /** Files go to {@code dir}; {@code devices} devices (negative: unchanged); memory cap (negative: none). */
    void configure(Path dir, int devices, long memoryBytes) {
        try (Arena arena = Arena.ofConfined()) {
            configure.invokeExact(arena.allocateFrom(dir.toString()), devices, memoryBytes);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** A counter by name: calls of an entry point ("cuEventCreate"), or "liveAllocations" and the like. */
    long counter(String name) {
        try (Arena arena = Arena.ofConfined()) {
            long value = (long) counter.invokeExact(arena.allocateFrom(name));
            if (value < 0) {
                throw new IllegalArgumentException("the test double has no counter " + name);
            }
            return value;
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** Holds (true) or releases every stream of this process before its next operation. */
    void pause(boolean on) {
        try {
            pause.invokeExact(on ? 1 : 0);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** Operations queued or running on this process's streams. */
    long pending() {
        try {
            return (long) pending.invokeExact();
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** The double's defaults for every setting {@link #set} changes. */
    static final java.util.Map<String, Long> DEFAULTS = java.util.Map.of("driverVersion", 13000L, "computeMode", 0L,
            "unifiedAddressing", 1L, "ipcEvents", 1L, "legacy", 0L, "maxIpcEvents", -1L, "copyLatencyMicros", 5000L);

    /** One setting of the double (driverVersion, computeMode, unifiedAddressing, ipcEvents, legacy, maxIpcEvents). */
    void set(String key, long value) {
        try (Arena arena = Arena.ofConfined()) {
            if ((int) set.invokeExact(arena.allocateFrom(key), value) != 0) {
                throw new IllegalArgumentException("the test double has no setting " + key);
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** Every setting back to its default. */
    void reset() {
        DEFAULTS.forEach(this::set);
        fail("", 0, 0);
    }

    /** The next {@code times} calls of {@code entry} (e.g. "cuStreamSynchronize") return {@code code}. */
    void fail(String entry, int code, int times) {
        try (Arena arena = Arena.ofConfined()) {
            fail.invokeExact(arena.allocateFrom(entry), code, times);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** Misuses the double recorded in this process (see the double's header comment). */
    long violations() {
        return counter("violations");
    }

    /** The text of the last violation recorded in this process, or "". */
    String lastViolation() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(512);
            lastViolation.invokeExact(buf, 512);
            return buf.getString(0);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
