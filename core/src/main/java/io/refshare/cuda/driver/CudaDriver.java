package io.refshare.cuda.driver;

import io.refshare.cuda.CudaException;
import io.refshare.cuda.CudaUnavailableException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The CUDA driver API calls refshare uses, bound through FFM to {@code libcuda.so.1} (no JNI,
 * no toolkit needed: only the driver). Every call's {@code CUresult} is checked; an error
 * becomes a {@link CudaException} naming the call, its arguments, the error's name and text.
 *
 * <p><b>Loading is lazy.</b> Nothing here runs until a process first uses device memory, so
 * host-only use never looks for a driver. {@link #system()} loads the library once per
 * process: the path in the system property {@value #LIBRARY_PROPERTY}, else in the
 * environment variable {@value #LIBRARY_ENV}, else {@value #DEFAULT_LIBRARY} from the
 * loader's search path. The tests point it at an ABI-compatible test double.
 *
 * <p><b>ABI.</b> {@code CUdeviceptr} is a 64-bit integer, {@code CUdevice} an int, contexts,
 * streams and events are opaque pointers ({@link MemorySegment} addresses here), and the two
 * IPC handles are 64-byte structs passed <em>by value</em> ({@link #IPC_MEM_HANDLE},
 * {@link #IPC_EVENT_HANDLE}), exactly as {@code cuda.h} declares them. The {@code _v2} entry
 * points are the ones {@code cuda.h} maps the plain names to on 64-bit builds.
 *
 * <p>The driver calls need a current context on the calling thread; {@link CudaContext}
 * makes its context current before each use. This class itself holds no state but the
 * bound entry points, and is thread-safe.
 */
public final class CudaDriver {
    public static final String LIBRARY_PROPERTY = "refshare.cuda.library";
    public static final String LIBRARY_ENV = "REFSHARE_LIBCUDA";
    public static final String DEFAULT_LIBRARY = "libcuda.so.1";

    /** {@code CU_IPC_HANDLE_SIZE}. */
    public static final int IPC_HANDLE_BYTES = 64;
    /** {@code CUipcMemHandle}: {@code struct { char reserved[64]; }}. */
    public static final StructLayout IPC_MEM_HANDLE = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(IPC_HANDLE_BYTES, JAVA_BYTE).withName("reserved")).withName("CUipcMemHandle");
    /** {@code CUipcEventHandle}: {@code struct { char reserved[64]; }}. */
    public static final StructLayout IPC_EVENT_HANDLE = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(IPC_HANDLE_BYTES, JAVA_BYTE).withName("reserved")).withName("CUipcEventHandle");

    /** The oldest driver with every entry point bound here ({@code cuIpcOpenMemHandle_v2}, {@code cuDevicePrimaryCtxRelease_v2}). */
    static final int MINIMUM_DRIVER_VERSION = 11000;

    // constants named as in cuda.h (CudaAbiTest checks every static int named CU_* or CUDA_* against it)
    static final int CUDA_ERROR_INVALID_VALUE = 1;
    static final int CUDA_ERROR_OUT_OF_MEMORY = 2;
    static final int CUDA_ERROR_NO_DEVICE = 100;
    static final int CUDA_ERROR_NOT_READY = 600;
    static final int CU_EVENT_DISABLE_TIMING = 0x2;
    static final int CU_EVENT_INTERPROCESS = 0x4;
    static final int CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;
    static final int CU_STREAM_NON_BLOCKING = 0x1;
    static final int CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20;
    static final int CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
    static final int CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125;
    static final int CU_COMPUTEMODE_PROHIBITED = 2;
    static final int CU_COMPUTEMODE_EXCLUSIVE_PROCESS = 3;

    private static final Linker LINKER = Linker.nativeLinker();

    private final String library;
    private final MethodHandle getErrorName;
    private final MethodHandle getErrorString;
    private final MethodHandle init;
    private final MethodHandle driverGetVersion;
    private final MethodHandle deviceGetCount;
    private final MethodHandle deviceGet;
    private final MethodHandle deviceGetName;
    private final MethodHandle deviceGetAttribute;
    private final MethodHandle primaryCtxRetain;
    private final MethodHandle primaryCtxRelease;
    private final MethodHandle ctxSetCurrent;
    private final MethodHandle ctxGetCurrent;
    private final MethodHandle memAlloc;
    private final MethodHandle memFree;
    private final MethodHandle memGetAddressRange;
    private final MethodHandle ipcGetMemHandle;
    private final MethodHandle ipcOpenMemHandle;
    private final MethodHandle ipcCloseMemHandle;
    private final MethodHandle eventCreate;
    private final MethodHandle eventRecord;
    private final MethodHandle eventDestroy;
    private final MethodHandle ipcGetEventHandle;
    private final MethodHandle ipcOpenEventHandle;
    private final MethodHandle streamCreate;
    private final MethodHandle streamDestroy;
    private final MethodHandle eventQuery;
    private final MethodHandle streamSynchronize;
    private final MethodHandle memcpyHtoDAsync;
    private final MethodHandle memcpyDtoHAsync;

    /**
     * Every entry point refshare binds, with its C prototype as a descriptor: the names are the
     * versioned ones {@code cuda.h} maps the plain names to (on 64-bit builds), and
     * {@code CudaAbiTest} compares names and descriptors with {@code cuda.h}'s prototypes.
     */
    static final Map<String, FunctionDescriptor> SIGNATURES = signatures();

    private static Map<String, FunctionDescriptor> signatures() {
        Map<String, FunctionDescriptor> m = new LinkedHashMap<>();
        m.put("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        m.put("cuGetErrorString", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        m.put("cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        m.put("cuDriverGetVersion", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuDeviceGetCount", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        m.put("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        m.put("cuDeviceGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        m.put("cuDevicePrimaryCtxRetain", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        m.put("cuDevicePrimaryCtxRelease_v2", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        m.put("cuCtxSetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuCtxGetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuMemAlloc_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        m.put("cuMemFree_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        m.put("cuMemGetAddressRange_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG));
        m.put("cuIpcGetMemHandle", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        m.put("cuIpcOpenMemHandle_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, IPC_MEM_HANDLE, JAVA_INT));
        m.put("cuIpcCloseMemHandle", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        m.put("cuEventCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        m.put("cuEventRecord", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        m.put("cuEventDestroy_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuIpcGetEventHandle", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        m.put("cuIpcOpenEventHandle", FunctionDescriptor.of(JAVA_INT, ADDRESS, IPC_EVENT_HANDLE));
        m.put("cuStreamCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        m.put("cuStreamDestroy_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuEventQuery", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuStreamSynchronize", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        m.put("cuMemcpyHtoDAsync_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
        m.put("cuMemcpyDtoHAsync_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
        return Collections.unmodifiableMap(m);
    }

    private CudaDriver(String library, SymbolLookup lib) {
        this.library = library;
        Binder b = new Binder(library, lib);
        getErrorName = b.bind("cuGetErrorName");
        getErrorString = b.bind("cuGetErrorString");
        init = b.bind("cuInit");
        driverGetVersion = b.bind("cuDriverGetVersion");
        deviceGetCount = b.bind("cuDeviceGetCount");
        deviceGet = b.bind("cuDeviceGet");
        deviceGetName = b.bind("cuDeviceGetName");
        deviceGetAttribute = b.bind("cuDeviceGetAttribute");
        primaryCtxRetain = b.bind("cuDevicePrimaryCtxRetain");
        primaryCtxRelease = b.bind("cuDevicePrimaryCtxRelease_v2");
        ctxSetCurrent = b.bind("cuCtxSetCurrent");
        ctxGetCurrent = b.bind("cuCtxGetCurrent");
        memAlloc = b.bind("cuMemAlloc_v2");
        memFree = b.bind("cuMemFree_v2");
        memGetAddressRange = b.bind("cuMemGetAddressRange_v2");
        ipcGetMemHandle = b.bind("cuIpcGetMemHandle");
        ipcOpenMemHandle = b.bind("cuIpcOpenMemHandle_v2");
        ipcCloseMemHandle = b.bind("cuIpcCloseMemHandle");
        eventCreate = b.bind("cuEventCreate");
        eventRecord = b.bind("cuEventRecord");
        eventDestroy = b.bind("cuEventDestroy_v2");
        ipcGetEventHandle = b.bind("cuIpcGetEventHandle");
        ipcOpenEventHandle = b.bind("cuIpcOpenEventHandle");
        streamCreate = b.bind("cuStreamCreate");
        streamDestroy = b.bind("cuStreamDestroy_v2");
        eventQuery = b.bind("cuEventQuery");
        streamSynchronize = b.bind("cuStreamSynchronize");
        memcpyHtoDAsync = b.bind("cuMemcpyHtoDAsync_v2");
        memcpyDtoHAsync = b.bind("cuMemcpyDtoHAsync_v2");
    }

    /** Looks up entry points, turning a missing one into a plain "driver too old" message. */
    private record Binder(String library, SymbolLookup lib) {
        MethodHandle bind(String name) {
            Optional<MemorySegment> symbol = lib.find(name);
            if (symbol.isEmpty()) {
                throw new CudaUnavailableException("CUDA driver " + library + " has no entry point " + name
                        + ": the driver is too old or this is not libcuda");
            }
            return LINKER.downcallHandle(symbol.get(), SIGNATURES.get(name));
        }
    }

    /**
     * The driver of this process, loaded and initialized ({@code cuInit}) on first use; a
     * failure is remembered and reported again on every later call.
     *
     * @throws CudaUnavailableException when there is no usable driver
     */
    public static CudaDriver system() {
        Object loaded = SystemDriver.LOADED;
        if (loaded instanceof CudaDriver d) {
            return d;
        }
        CudaUnavailableException failure = (CudaUnavailableException) loaded;
        throw new CudaUnavailableException(failure.getMessage(), failure);
    }

    /** The library {@link #system()} loads: the property, the environment variable, or the default. */
    public static String configuredLibrary() {
        String p = System.getProperty(LIBRARY_PROPERTY);
        if (p != null && !p.isBlank()) {
            return p;
        }
        String e = System.getenv(LIBRARY_ENV);
        return e != null && !e.isBlank() ? e : DEFAULT_LIBRARY;
    }

    private static final class SystemDriver {
        static final Object LOADED = loadOrFailure();

        private static Object loadOrFailure() {
            try {
                return load(configuredLibrary());
            } catch (CudaUnavailableException e) {
                return e;
            }
        }
    }

    /**
     * Loads {@code library} (a file name the loader searches for, or a path), binds every
     * entry point and calls {@code cuInit(0)}.
     *
     * @throws CudaUnavailableException when the library cannot be loaded, lacks an entry
     *                                  point, or the driver cannot start (for example: no device)
     */
    public static CudaDriver load(String library) {
        SymbolLookup lib;
        try {
            lib = SymbolLookup.libraryLookup(library, Arena.global());
        } catch (IllegalArgumentException e) {
            throw new CudaUnavailableException("no CUDA driver: cannot load " + library + " (" + e.getMessage()
                    + "); CUDA needs the NVIDIA driver, or point " + LIBRARY_ENV + " (or -D" + LIBRARY_PROPERTY
                    + ") at libcuda.so", e);
        }
        checkVersion(library, lib);
        CudaDriver driver = new CudaDriver(library, lib);
        int rc = invoke(() -> (int) driver.init.invokeExact(0));
        if (rc == CUDA_ERROR_NO_DEVICE) {
            throw new CudaUnavailableException("no CUDA device: cuInit(0) returned " + driver.errorName(rc) + " ("
                    + driver.errorString(rc) + ") with driver " + library);
        }
        if (rc != 0) {
            throw new CudaUnavailableException("the CUDA driver " + library + " cannot start: cuInit(0) failed: "
                    + driver.errorName(rc) + " (" + driver.errorString(rc) + ")");
        }
        return driver;
    }

    /**
     * Refuses a driver older than {@value #MINIMUM_DRIVER_VERSION} (CUDA 11.0) with a plain
     * message, before binding entry points it lacks. {@code cuDriverGetVersion} exists in
     * every driver and may be called before {@code cuInit}.
     */
    private static void checkVersion(String library, SymbolLookup lib) {
        MethodHandle getVersion = new Binder(library, lib).bind("cuDriverGetVersion");
        int version;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            int rc = invoke(() -> (int) getVersion.invokeExact(out));
            if (rc != 0) {
                throw new CudaUnavailableException("the CUDA driver " + library + " cannot start: cuDriverGetVersion"
                        + " failed with code " + rc);
            }
            version = out.get(JAVA_INT, 0);
        }
        if (version < MINIMUM_DRIVER_VERSION) {
            throw new CudaUnavailableException("the CUDA driver " + library + " is too old: it supports CUDA "
                    + versionName(version) + ", refshare needs CUDA " + versionName(MINIMUM_DRIVER_VERSION)
                    + " or newer (for cuIpcOpenMemHandle_v2 and cuDevicePrimaryCtxRelease_v2); update the NVIDIA driver");
        }
    }

    /** 12040 -> "12.4", as cuda.h encodes versions. */
    static String versionName(int version) {
        return version / 1000 + "." + version % 1000 / 10;
    }

    /** The library this driver was loaded from. */
    public String library() {
        return library;
    }

    // ---- errors ---------------------------------------------------------------------------

    private void check(int rc, String call) {
        if (rc != 0) {
            throw new CudaException(call, rc, errorName(rc), errorString(rc));
        }
    }

    /** {@code cuGetErrorName}; for a code the driver does not know, a generic name with the number. */
    public String errorName(int code) {
        return errorText(getErrorName, code, "CUDA_ERROR_" + code);
    }

    /** {@code cuGetErrorString}; for a code the driver does not know, "unknown error". */
    public String errorString(int code) {
        return errorText(getErrorString, code, "unknown error " + code);
    }

    private static String errorText(MethodHandle h, int code, String fallback) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            int rc = (int) h.invokeExact(code, out);
            MemorySegment text = out.get(ADDRESS, 0);
            return rc == 0 && !text.equals(MemorySegment.NULL) ? text.reinterpret(512).getString(0) : fallback;
        } catch (Throwable t) {
            return fallback;
        }
    }

    // ---- devices and contexts -------------------------------------------------------------

    /** {@code cuDriverGetVersion}: e.g. 13000 for CUDA 13.0. */
    public int driverVersion() {
        return outInt(driverGetVersion, "cuDriverGetVersion");
    }

    /** {@code cuDeviceGetCount}. */
    public int deviceCount() {
        return outInt(deviceGetCount, "cuDeviceGetCount");
    }

    /** {@code cuDeviceGet}: the {@code CUdevice} of an ordinal. */
    public int device(int ordinal) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check(invoke(() -> (int) deviceGet.invokeExact(out, ordinal)), "cuDeviceGet(ordinal " + ordinal + ")");
            return out.get(JAVA_INT, 0);
        }
    }

    /** {@code cuDeviceGetName}. */
    public String deviceName(int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(256);
            check(invoke(() -> (int) deviceGetName.invokeExact(out, 256, device)),
                    "cuDeviceGetName(device " + device + ")");
            return out.getString(0);
        }
    }

    /**
     * {@code cuDeviceGetAttribute}; {@code ifUnknown} when the driver does not know the
     * attribute (it answers {@code CUDA_ERROR_INVALID_VALUE}: an attribute newer than the driver).
     */
    public int deviceAttribute(int attribute, int device, int ifUnknown) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            int rc = invoke(() -> (int) deviceGetAttribute.invokeExact(out, attribute, device));
            if (rc == CUDA_ERROR_INVALID_VALUE) {
                return ifUnknown;
            }
            check(rc, "cuDeviceGetAttribute(attribute " + attribute + ", device " + device + ")");
            return out.get(JAVA_INT, 0);
        }
    }

    /** {@code cuDevicePrimaryCtxRetain}: the device's primary context, one more reference to it. */
    public MemorySegment primaryContextRetain(int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check(invoke(() -> (int) primaryCtxRetain.invokeExact(out, device)),
                    "cuDevicePrimaryCtxRetain(device " + device + ")");
            return out.get(ADDRESS, 0);
        }
    }

    /** {@code cuDevicePrimaryCtxRelease_v2}. */
    public void primaryContextRelease(int device) {
        check(invoke(() -> (int) primaryCtxRelease.invokeExact(device)),
                "cuDevicePrimaryCtxRelease_v2(device " + device + ")");
    }

    /** {@code cuCtxSetCurrent}: binds {@code context} to the calling thread. */
    public void setCurrentContext(MemorySegment context) {
        check(invoke(() -> (int) ctxSetCurrent.invokeExact(context)), "cuCtxSetCurrent");
    }

    /** {@code cuCtxGetCurrent}: the context bound to the calling thread ({@link MemorySegment#NULL} for none). */
    public MemorySegment currentContext() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check(invoke(() -> (int) ctxGetCurrent.invokeExact(out)), "cuCtxGetCurrent");
            return out.get(ADDRESS, 0);
        }
    }

    // ---- memory ---------------------------------------------------------------------------

    /** {@code cuMemAlloc_v2}: the device address of {@code bytes} new bytes. */
    public long memAlloc(long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check(invoke(() -> (int) memAlloc.invokeExact(out, bytes)), "cuMemAlloc_v2(" + bytes + " bytes)");
            return out.get(JAVA_LONG, 0);
        }
    }

    /** {@code cuMemFree_v2}. */
    public void memFree(long address) {
        check(invoke(() -> (int) memFree.invokeExact(address)), "cuMemFree_v2(" + hex(address) + ")");
    }

    /** The allocation an address lies in. */
    public record AddressRange(long base, long size) {
    }

    /** {@code cuMemGetAddressRange_v2}. */
    public AddressRange addressRange(long address) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment base = arena.allocate(JAVA_LONG);
            MemorySegment size = arena.allocate(JAVA_LONG);
            check(invoke(() -> (int) memGetAddressRange.invokeExact(base, size, address)),
                    "cuMemGetAddressRange_v2(" + hex(address) + ")");
            return new AddressRange(base.get(JAVA_LONG, 0), size.get(JAVA_LONG, 0));
        }
    }

    /** {@code cuIpcGetMemHandle}: the 64 bytes another process opens the allocation at {@code base} with. */
    public byte[] ipcGetMemHandle(long base) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(IPC_MEM_HANDLE);
            check(invoke(() -> (int) ipcGetMemHandle.invokeExact(out, base)), "cuIpcGetMemHandle(" + hex(base) + ")");
            return out.toArray(JAVA_BYTE);
        }
    }

    /**
     * {@code cuIpcOpenMemHandle_v2} with {@code CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}: maps
     * another process's allocation into this one and returns its address here. The handle
     * struct is passed by value.
     */
    public long ipcOpenMemHandle(byte[] handle) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment h = handleStruct(arena, IPC_MEM_HANDLE, handle);
            MemorySegment out = arena.allocate(JAVA_LONG);
            check(invoke(() -> (int) ipcOpenMemHandle.invokeExact(out, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)),
                    "cuIpcOpenMemHandle_v2");
            return out.get(JAVA_LONG, 0);
        }
    }

    /** {@code cuIpcCloseMemHandle}. */
    public void ipcCloseMemHandle(long address) {
        check(invoke(() -> (int) ipcCloseMemHandle.invokeExact(address)), "cuIpcCloseMemHandle(" + hex(address) + ")");
    }

    /** {@code cuMemcpyHtoDAsync_v2}, ordered on {@code stream}; {@code src} must be native memory. */
    public void memcpyHtoDAsync(long dst, MemorySegment src, long bytes, MemorySegment stream) {
        check(invoke(() -> (int) memcpyHtoDAsync.invokeExact(dst, src, bytes, stream)),
                "cuMemcpyHtoDAsync_v2(" + hex(dst) + ", " + bytes
                + " bytes)");
    }

    /** {@code cuMemcpyDtoHAsync_v2}, ordered on {@code stream}; {@code dst} must be native memory. */
    public void memcpyDtoHAsync(MemorySegment dst, long src, long bytes, MemorySegment stream) {
        check(invoke(() -> (int) memcpyDtoHAsync.invokeExact(dst, src, bytes, stream)),
                "cuMemcpyDtoHAsync_v2(" + hex(src) + ", " + bytes
                + " bytes)");
    }

    // ---- streams and events ---------------------------------------------------------------

    /** {@code cuStreamCreate}. */
    public MemorySegment streamCreate(int flags) {
        return outPointer(streamCreate, flags, "cuStreamCreate(flags " + flags + ")");
    }

    /** {@code cuStreamDestroy_v2}. */
    public void streamDestroy(MemorySegment stream) {
        check(invoke(() -> (int) streamDestroy.invokeExact(stream)), "cuStreamDestroy_v2");
    }

    /** {@code cuStreamSynchronize}: waits until all work queued on {@code stream} has run. */
    public void streamSynchronize(MemorySegment stream) {
        check(invoke(() -> (int) streamSynchronize.invokeExact(stream)), "cuStreamSynchronize");
    }

    /**
     * {@code cuEventQuery}: whether the work recorded in the event is done ({@code CUDA_SUCCESS})
     * or not yet ({@code CUDA_ERROR_NOT_READY}); any other result is an error.
     */
    public boolean eventQuery(MemorySegment event) {
        int result = invoke(() -> (int) eventQuery.invokeExact(event));
        if (result == CUDA_ERROR_NOT_READY) {
            return false;
        }
        check(result, "cuEventQuery");
        return true;
    }

    /** {@code cuEventCreate}. */
    public MemorySegment eventCreate(int flags) {
        return outPointer(eventCreate, flags, "cuEventCreate(flags " + flags + ")");
    }

    /** {@code cuEventRecord}: the event completes when the work queued on {@code stream} so far has. */
    public void eventRecord(MemorySegment event, MemorySegment stream) {
        check(invoke(() -> (int) eventRecord.invokeExact(event, stream)), "cuEventRecord");
    }

    /** {@code cuEventDestroy_v2}. */
    public void eventDestroy(MemorySegment event) {
        check(invoke(() -> (int) eventDestroy.invokeExact(event)), "cuEventDestroy_v2");
    }

    /** {@code cuIpcGetEventHandle}: the 64 bytes another process opens an interprocess event with. */
    public byte[] ipcGetEventHandle(MemorySegment event) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(IPC_EVENT_HANDLE);
            check(invoke(() -> (int) ipcGetEventHandle.invokeExact(out, event)), "cuIpcGetEventHandle");
            return out.toArray(JAVA_BYTE);
        }
    }

    /** {@code cuIpcOpenEventHandle}: another process's event, usable here; the handle struct is passed by value. */
    public MemorySegment ipcOpenEventHandle(byte[] handle) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment h = handleStruct(arena, IPC_EVENT_HANDLE, handle);
            MemorySegment out = arena.allocate(ADDRESS);
            check(invoke(() -> (int) ipcOpenEventHandle.invokeExact(out, h)), "cuIpcOpenEventHandle");
            return out.get(ADDRESS, 0);
        }
    }

    // ---- plumbing -------------------------------------------------------------------------

    private static MemorySegment handleStruct(Arena arena, StructLayout layout, byte[] handle) {
        if (handle.length != IPC_HANDLE_BYTES) {
            throw new IllegalArgumentException(layout.name().orElseThrow() + " must be " + IPC_HANDLE_BYTES
                    + " bytes, was " + handle.length);
        }
        MemorySegment h = arena.allocate(layout);
        MemorySegment.copy(handle, 0, h, JAVA_BYTE, 0, IPC_HANDLE_BYTES);
        return h;
    }

    private int outInt(MethodHandle h, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check(invoke(() -> (int) h.invokeExact(out)), call);
            return out.get(JAVA_INT, 0);
        }
    }

    private MemorySegment outPointer(MethodHandle h, int flags, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check(invoke(() -> (int) h.invokeExact(out, flags)), call);
            return out.get(ADDRESS, 0);
        }
    }

    /** One downcall through {@code invokeExact}; its exact types are fixed by the descriptors above. */
    @FunctionalInterface
    private interface Downcall {
        int invoke() throws Throwable;
    }

    private static int invoke(Downcall downcall) {
        try {
            return downcall.invoke();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new AssertionError("downcall failed: " + t, t);
        }
    }

    static String hex(long address) {
        return "0x" + Long.toHexString(address);
    }

    @Override
    public String toString() {
        return "CUDA driver " + library;
    }
}
