package io.refshare.cuda.driver;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Blocks a stream of the real driver for as long as its process lives: the stream waits for a
 * device word to become 1, and nothing ever writes it. Work queued after it (an event record,
 * a copy) never runs. The test double has its own pause for this; this is the real driver's.
 */
final class StreamHold {
    private static final int CU_STREAM_WAIT_VALUE_EQ = 0x1;

    private StreamHold() {
    }

    static void forever(MemorySegment stream) {
        Linker linker = Linker.nativeLinker();
        SymbolLookup cuda = SymbolLookup.libraryLookup(CudaDriver.configuredLibrary(), Arena.global());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ctx = arena.allocate(ADDRESS);
            check("cuDevicePrimaryCtxRetain", (int) call(linker, cuda, "cuDevicePrimaryCtxRetain",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT)).invokeExact(ctx, 0));
            check("cuCtxPushCurrent_v2", (int) call(linker, cuda, "cuCtxPushCurrent_v2",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS)).invokeExact(ctx.get(ADDRESS, 0)));
            MemorySegment word = arena.allocate(JAVA_LONG);
            check("cuMemAlloc_v2", (int) call(linker, cuda, "cuMemAlloc_v2",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG)).invokeExact(word, 4L));
            long devicePtr = word.get(JAVA_LONG, 0);
            check("cuMemsetD32_v2", (int) call(linker, cuda, "cuMemsetD32_v2",
                    FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG)).invokeExact(devicePtr, 0, 1L));
            check("cuStreamWaitValue32_v2", (int) call(linker, cuda, "cuStreamWaitValue32_v2",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT))
                    .invokeExact(stream, devicePtr, 1, CU_STREAM_WAIT_VALUE_EQ));
            check("cuCtxPopCurrent_v2", (int) call(linker, cuda, "cuCtxPopCurrent_v2",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS)).invokeExact(arena.allocate(ADDRESS)));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    private static MethodHandle call(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        return linker.downcallHandle(lib.find(name).orElseThrow(() -> new IllegalStateException("no " + name)), fd);
    }

    private static void check(String call, int result) {
        if (result != 0) {
            throw new IllegalStateException(call + " returned CUresult " + result);
        }
    }
}
