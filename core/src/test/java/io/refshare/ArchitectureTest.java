package io.refshare;

import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The shape of the house, read from the compiled classes: the module exports the user API
 * and nothing else, and no dependency between core packages runs back up a floor (the
 * package graph has no cycle).
 */
class ArchitectureTest {
    private static final Path CLASSES = Path.of("target", "classes");

    @Test
    void theModuleExportsTheUserApiAndGivesTheToolItsInspectionPackages() {
        ModuleDescriptor module = ModuleFinder.of(CLASSES).find("io.refshare").orElseThrow().descriptor();
        Map<String, Set<String>> exports = new TreeMap<>();
        for (ModuleDescriptor.Exports e : module.exports()) {
            exports.put(e.source(), e.isQualified() ? new TreeSet<>(e.targets()) : Set.of());
        }
        Map<String, Set<String>> expected = new TreeMap<>(Map.of(
                "io.refshare", Set.of(),
                "io.refshare.cuda", Set.of(),
                "io.refshare.exceptions", Set.of(),
                "io.refshare.stats", Set.of(),
                "io.refshare.tensor", Set.of(),
                "io.refshare.inspect", Set.of("io.refshare.cli"),
                "io.refshare.shm", Set.of("io.refshare.cli")));
        assertEquals(expected, exports, "exported packages (qualified ones with their only reader)");
        assertTrue(module.opens().isEmpty(), "nothing is open to reflection");
    }

    @Test
    void noPackageDependsOnAPackageThatDependsBackOnIt() {
        Map<String, Set<String>> graph = packageGraph();
        assertTrue(graph.size() > 5, "jdeps saw the packages: " + graph.keySet());
        List<Set<String>> cycles = stronglyConnected(graph).stream().filter(c -> c.size() > 1).toList();
        assertEquals(List.of(), cycles, "package cycles (each set depends on itself through the others); graph: "
                + graph);
    }

    /** Package → the core packages its classes use, by jdeps over the compiled classes. */
    private static Map<String, Set<String>> packageGraph() {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps").orElseThrow();
        StringWriter out = new StringWriter();
        int rc = jdeps.run(new PrintWriter(out), new PrintWriter(out), "-verbose:package", "--ignore-missing-deps",
                CLASSES.toString());
        assertEquals(0, rc, out.toString());
        Pattern edge = Pattern.compile("^\\s+(io\\.refshare[\\w.]*)\\s+->\\s+(io\\.refshare[\\w.]*)\\s", Pattern.MULTILINE);
        Map<String, Set<String>> graph = new TreeMap<>();
        Matcher m = edge.matcher(out.toString());
        while (m.find()) {
            graph.computeIfAbsent(m.group(1), k -> new TreeSet<>()).add(m.group(2));
            graph.computeIfAbsent(m.group(2), k -> new TreeSet<>());
        }
        graph.forEach((from, to) -> to.remove(from));
        return graph;
    }

    /** Tarjan's strongly connected components. */
    private static List<Set<String>> stronglyConnected(Map<String, Set<String>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> components = new ArrayList<>();
        for (String v : graph.keySet()) {
            if (!index.containsKey(v)) {
                connect(v, graph, index, low, stack, onStack, components);
            }
        }
        return components;
    }

    private static void connect(String v, Map<String, Set<String>> graph, Map<String, Integer> index,
            Map<String, Integer> low, Deque<String> stack, Set<String> onStack, List<Set<String>> components) {
        index.put(v, index.size());
        low.put(v, index.get(v));
        stack.push(v);
        onStack.add(v);
        for (String w : graph.get(v)) {
            if (!index.containsKey(w)) {
                connect(w, graph, index, low, stack, onStack, components);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            Set<String> component = new TreeSet<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            components.add(component);
        }
    }
}
