package io.refshare.cuda.driver;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The ABI guards: the CUDA bindings ({@link CudaDriver#SIGNATURES}, its {@code CU_*}/{@code
 * CUDA_*} constants) and the test double (its exported entry points, the types and constants
 * between its "ABI" markers) against the real {@code cuda.h}. They fail, not skip, wherever
 * {@code cuda.h} is present ({@code $CUDA_HOME/include}, else {@code /usr/local/cuda/include});
 * only a machine without it skips them.
 *
 * <p>The double never includes {@code cuda.h} (its macros would rename {@code cuMemAlloc} to
 * {@code cuMemAlloc_v2} in the double's own definitions and so hide a wrong name). Instead:
 * names are checked by preprocessing each one with {@code cuda.h} (a name it renames is the
 * legacy ABI); the double's prototypes, types and constants by compiling a generated
 * translation unit that includes {@code cuda.h} and assigns each entry point to a pointer
 * with the double's parameter list; the Java descriptors by comparing them with the
 * prototypes parsed from the preprocessed header.
 */
class CudaAbiTest {
    private static final Pattern PROTOTYPE = Pattern.compile("\\bCUresult\\s+(cu\\w+)\\s*\\(([^()]*)\\)");
    private static final Pattern EXPORTED = Pattern.compile("EXPORT CUresult (cu\\w+)\\(([^)]*)\\)\\s*\\{");

    private static Path header() {
        Path header = Path.of(System.getenv().getOrDefault("CUDA_HOME", "/usr/local/cuda"), "include", "cuda.h");
        Assumptions.assumeTrue(Files.isRegularFile(header), "no cuda.h at " + header + " to check the ABI against");
        return header;
    }

    /** What preprocessing {@code text} with cuda.h gives (its macros applied). */
    private static String preprocess(Path header, String text) throws IOException {
        Path dir = Files.createDirectories(CudaTestSupport.moduleDirectory().resolve("target/cuda-abi"));
        Path source = Files.writeString(dir.resolve("preprocess.c"), "#include <cuda.h>\n" + text);
        Path out = dir.resolve("preprocess.i");
        String problem = CudaTestSupport.run(List.of(CudaTestSupport.compiler(), "-E", "-P", "-I" + header.getParent(),
                "-o", out.toString(), source.toString()));
        if (problem != null) {
            fail("cannot preprocess cuda.h: " + problem);
        }
        return Files.readString(out);
    }

    private static String doubleSource() throws IOException {
        return Files.readString(CudaTestSupport.moduleDirectory().resolve(CudaTestSupport.SOURCE));
    }

    private static Map<String, String> exportedByDouble(String source) {
        Map<String, String> exported = new LinkedHashMap<>();
        Matcher m = EXPORTED.matcher(source);
        while (m.find()) {
            exported.put(m.group(1), m.group(2).replaceAll("\\s+", " ").trim());
        }
        return exported;
    }

    /** Every name bound or exported is one cuda.h declares and does not rename (a renamed one is the legacy ABI). */
    @Test
    void namesAreTheVersionedOnesCudaHUses() throws IOException {
        Path header = header();
        List<String> names = new ArrayList<>(CudaDriver.SIGNATURES.keySet());
        names.addAll(exportedByDouble(doubleSource()).keySet());
        StringBuilder probe = new StringBuilder();
        for (String name : names) {
            probe.append("REFSHARE_NAME ").append(name).append('\n');
        }
        String out = preprocess(header, probe.toString());
        Map<String, String> prototypes = prototypes(out);
        Matcher m = Pattern.compile("REFSHARE_NAME (\\w+)").matcher(out);
        List<String> problems = new ArrayList<>();
        for (String name : names) {
            if (!m.find()) {
                fail("preprocessing lost names");
            }
            if (!m.group(1).equals(name)) {
                problems.add(name + ": cuda.h maps this name to " + m.group(1) + " (the plain name is an older ABI)");
            } else if (!prototypes.containsKey(name)) {
                problems.add(name + ": cuda.h declares no such entry point");
            }
        }
        assertEquals(List.of(), problems);
    }

    /** The Java descriptors have cuda.h's parameter kinds and sizes, the 64-byte handles by value. */
    @Test
    void javaDescriptorsMatchCudaHPrototypes() throws IOException {
        String out = preprocess(header(), "");
        Map<String, String> prototypes = prototypes(out);
        Map<String, String> typedefs = typedefs(out);
        List<String> problems = new ArrayList<>();
        CudaDriver.SIGNATURES.forEach((name, descriptor) -> {
            String params = prototypes.get(name);
            if (params == null) {
                problems.add(name + ": not in cuda.h");
                return;
            }
            List<String> c = new ArrayList<>();
            for (String p : params.split(",")) {
                if (!p.isBlank() && !p.strip().equals("void")) {
                    c.add(kind(p.strip(), typedefs));
                }
            }
            List<String> java = new ArrayList<>();
            descriptor.argumentLayouts().forEach(l -> java.add(kind(l)));
            if (!c.equals(java) || !descriptor.returnLayout().map(CudaAbiTest::kind).orElse("void").equals("int4")) {
                problems.add(name + ": cuda.h (" + params.strip() + ") is " + c + ", the Java descriptor is " + java
                        + " returning " + descriptor.returnLayout().map(CudaAbiTest::kind).orElse("void"));
            }
        });
        assertEquals(List.of(), problems);
    }

    /**
     * The double's prototypes, types and constants and the Java constants, compiled against
     * cuda.h in a generated translation unit: a mismatch is a compile error naming it.
     */
    @Test
    void doublePrototypesTypesAndConstantsCompileAgainstCudaH() throws IOException, IllegalAccessException {
        Path header = header();
        String source = doubleSource();
        int start = source.indexOf("/* ---- ABI:");
        int end = source.indexOf("/* ---- end of ABI ---- */");
        if (start < 0 || end < 0) {
            fail("the double has no ABI markers");
        }
        String abi = source.substring(start, end);
        StringBuilder c = new StringBuilder("#include <cuda.h>\n");
        Matcher typedef = Pattern.compile("typedef\\s+(enum|struct)\\s+(\\w+)\\s*\\{[^}]*\\}\\s*(\\w+)\\s*;").matcher(abi);
        while (typedef.find()) {
            c.append(compatible(typedef.group(1) + " " + typedef.group(2), typedef.group(3)));
        }
        Matcher simple = Pattern.compile("typedef\\s+([^;{}]+?)\\s*\\b(\\w+)\\s*;").matcher(abi.replaceAll(
                "typedef\\s+(enum|struct)\\s+\\w+\\s*\\{[^}]*\\}\\s*\\w+\\s*;", ""));
        while (simple.find()) {
            c.append(compatible(simple.group(1), simple.group(2)));
        }
        c.append("_Static_assert(sizeof(CUipcMemHandle) == 64 && sizeof(CUipcEventHandle) == 64, \"IPC handles\");\n");
        Matcher define = Pattern.compile("#define\\s+(CU\\w+)\\s+(\\S+)").matcher(abi);
        while (define.find()) {
            c.append(equal(define.group(1), define.group(2), "the double's"));
        }
        Matcher member = Pattern.compile("\\b(CU\\w+)\\s*=\\s*(\\w+)").matcher(abi);
        while (member.find()) {
            c.append(equal(member.group(1), member.group(2), "the double's"));
        }
        for (Field f : CudaDriver.class.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && f.getType() == int.class
                    && (f.getName().startsWith("CU_") || f.getName().startsWith("CUDA_"))) {
                f.setAccessible(true);
                c.append(equal(f.getName(), Integer.toString(f.getInt(null)), "CudaDriver's"));
            }
        }
        c.append(equal("CU_IPC_HANDLE_SIZE", Integer.toString(CudaDriver.IPC_HANDLE_BYTES), "CudaDriver.IPC_HANDLE_BYTES:"));
        c.append("void refshare_abi_check(void);\nvoid refshare_abi_check(void) {\n");
        exportedByDouble(source).forEach((name, params) -> c.append("    CUresult (*volatile check_").append(name)
                .append(")(").append(params).append(") = ").append(name).append(";\n    (void) check_").append(name)
                .append(";\n"));
        c.append("}\n");
        Path dir = Files.createDirectories(CudaTestSupport.moduleDirectory().resolve("target/cuda-abi"));
        Path unit = Files.writeString(dir.resolve("refshare_cuda_abi_check.c"), c.toString());
        String problem = CudaTestSupport.run(List.of(CudaTestSupport.compiler(), "-std=c11", "-Wall", "-Wextra",
                "-Werror", "-c", "-I" + header.getParent(), "-o", dir.resolve("abi_check.o").toString(),
                unit.toString()));
        assertEquals(null, problem, "the generated check " + unit + " does not compile against " + header);
    }

    private static String compatible(String type, String name) {
        return "_Static_assert(__builtin_types_compatible_p(" + type + ", " + name + "), \"the double's typedef "
                + name + " is " + type + ", not cuda.h's\");\n";
    }

    private static String equal(String name, String value, String whose) {
        return "_Static_assert(" + name + " == " + value + ", \"" + whose + " " + name + " is " + value
                + ", cuda.h's differs\");\n";
    }

    private static Map<String, String> prototypes(String preprocessed) {
        Map<String, String> prototypes = new HashMap<>();
        Matcher m = PROTOTYPE.matcher(preprocessed);
        while (m.find()) {
            prototypes.putIfAbsent(m.group(1), m.group(2).replaceAll("\\s+", " "));
        }
        return prototypes;
    }

    /** typedef name -> what it stands for: a type text, or "int4" for an enum, or "struct N" for a struct of N bytes. */
    private static Map<String, String> typedefs(String preprocessed) {
        Map<String, String> typedefs = new HashMap<>();
        Matcher block = Pattern.compile("typedef\\s+(enum|struct)\\s*\\w*\\s*\\{([^{}]*)\\}\\s*(\\w+)\\s*;")
                .matcher(preprocessed);
        while (block.find()) {
            String what = block.group(1).equals("enum") ? "int4" : "struct " + structBytes(block.group(2));
            typedefs.put(block.group(3), what);
        }
        Matcher simple = Pattern.compile("typedef\\s+([^;{}()]+?)\\s*\\b(\\w+)\\s*;").matcher(preprocessed);
        while (simple.find()) {
            typedefs.putIfAbsent(simple.group(2), simple.group(1).strip());
        }
        return typedefs;
    }

    /** Bytes of a struct made of char arrays (the IPC handles); -1 for anything else. */
    private static long structBytes(String body) {
        long bytes = 0;
        for (String member : body.split(";")) {
            Matcher m = Pattern.compile("^\\s*(?:unsigned\\s+)?char\\s+\\w+\\s*\\[\\s*(\\d+)\\s*\\]\\s*$").matcher(member);
            if (m.find()) {
                bytes += Long.parseLong(m.group(1));
            } else if (!member.isBlank()) {
                return -1;
            }
        }
        return bytes;
    }

    /** The kind of one C parameter ("CUdeviceptr *dptr", "size_t bytesize"): ptr, int4, int8 or struct N. */
    private static String kind(String param, Map<String, String> typedefs) {
        if (param.contains("*")) {
            return "ptr";
        }
        String[] words = param.replace("const ", "").strip().split("\\s+");
        String type = words.length > 1 ? String.join(" ", java.util.Arrays.copyOf(words, words.length - 1)) : words[0];
        for (int depth = 0; depth < 20; depth++) {
            if (type.contains("*")) {
                return "ptr";
            }
            if (type.equals("int4") || type.startsWith("struct ") && type.matches("struct -?\\d+")) {
                return type;
            }
            if (type.startsWith("enum ")) {
                return "int4";
            }
            if (type.matches("(unsigned |signed )?(long )?long( unsigned)?( int)?|long unsigned int|size_t")) {
                return "int8";
            }
            if (type.matches("(unsigned |signed )?int|unsigned")) {
                return "int4";
            }
            String next = typedefs.get(type);
            if (next == null) {
                return "unknown " + type;
            }
            type = next;
        }
        return "unknown " + type;
    }

    private static String kind(MemoryLayout layout) {
        if (layout instanceof AddressLayout) {
            return "ptr";
        }
        if (layout instanceof StructLayout s) {
            return "struct " + s.byteSize();
        }
        if (layout instanceof ValueLayout.OfInt) {
            return "int4";
        }
        if (layout instanceof ValueLayout.OfLong) {
            return "int8";
        }
        return "unsupported " + layout;
    }

    @Test
    void everyDescriptorReturnsCUresult() {
        for (FunctionDescriptor d : CudaDriver.SIGNATURES.values()) {
            assertEquals("int4", d.returnLayout().map(CudaAbiTest::kind).orElse("void"), d.toString());
        }
    }
}
