package io.refshare.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
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

    private TestDouble(SymbolLookup lib) {
        configure = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_configure"),
                FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_LONG));
        counter = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_counter"),
                FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        pause = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_pause"),
                FunctionDescriptor.ofVoid(JAVA_INT));
        pending = LINKER.downcallHandle(lib.findOrThrow("refshare_cuda_double_pending"),
                FunctionDescriptor.of(JAVA_LONG));
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
}
