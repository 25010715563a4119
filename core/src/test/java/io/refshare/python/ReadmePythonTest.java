package io.refshare.python;

import io.refshare.Internals;
import io.refshare.Refshare;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.Tensor;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Python snippets of the README's "From Python" section, run as written against a Java
 * process on the other side. Only the default directory is pointed at the test's own (the
 * snippets use {@code refshare.open()} with its defaults).
 */
class ReadmePythonTest {
    /** Run before a snippet: its {@code name} (the queue, when given) and the test's directory. */
    private static final String PRELUDE = """
            import functools, sys
            import refshare
            refshare.open = functools.partial(refshare.open, directory=sys.argv[1])
            name = sys.argv[2] if len(sys.argv) > 2 else None
            """;

    @RegisterExtension
    final TempShm shm = new TempShm();

    private static List<String> snippets() throws IOException {
        String readme = Files.readString(PythonPeer.packageRoot().getParent().resolve("README.md"));
        String section = readme.substring(readme.indexOf("## From Python"));
        section = section.substring(0, section.indexOf("\n## ", 1));
        Matcher m = Pattern.compile("```python\\n(.*?)```", Pattern.DOTALL).matcher(section);
        List<String> blocks = new ArrayList<>();
        while (m.find()) {
            blocks.add(m.group(1));
        }
        assertEquals(2, blocks.size(), "the section shows a consumer and a producer");
        return blocks;
    }

    @Test
    void theConsumerSnippetTakesEveryTensorOfAJavaProducer() throws Exception {
        try (Refshare rs = Refshare.open(shm.config())) {
            try (ShareQueue queue = rs.createQueue(64);
                 PythonPeer py = PythonPeer.code(PRELUDE + snippets().get(0) + "print('DONE', flush=True)\n",
                         shm.path().toString(), queue.name())) {
                for (int i = 0; i < 100; i++) {
                    try (Tensor t = rs.allocate(DType.FLOAT32, 512, 512)) {
                        t.data().fill((byte) i);
                        queue.put(t);
                    }
                }
                queue.endOfStream();
                py.expect("DONE");
                assertEquals(0, py.finish());
                assertEquals(0, Internals.stats(queue).size(), "every tensor taken");
            }
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "and closed");
        }
    }

    @Test
    void theProducerSnippetsTensorsArriveInJava() throws Exception {
        try (PythonPeer py = PythonPeer.code(PRELUDE + snippets().get(1), shm.path().toString());
             Refshare rs = Refshare.open(shm.config());
             ShareQueue queue = rs.openQueue(py.read())) {
            int taken = 0;
            while (true) {
                Tensor t;
                try {
                    t = queue.take();
                } catch (QueueClosedException end) {
                    break;
                }
                try (t) {
                    assertEquals(512L * 512 * 4, t.data().byteSize());
                    for (long off = 0; off < t.data().byteSize(); off += 4) {
                        if (t.data().get(ValueLayout.JAVA_FLOAT_UNALIGNED, off) != taken) {
                            throw new AssertionError("tensor " + taken + " holds " + t.data().get(
                                    ValueLayout.JAVA_FLOAT_UNALIGNED, off) + " at byte " + off + ", expected "
                                    + taken + " (an earlier value: memory reused; a later one: messages lost)");
                        }
                    }
                }
                taken++;
            }
            assertEquals(1000, taken);
            assertEquals(0, py.finish());
        }
    }
}
