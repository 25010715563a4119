package io.refshare.python;

import io.refshare.channel.ChannelChildMain;
import io.refshare.Refshare;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.testing.ChildJvm;
import io.refshare.testing.TempShm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Queues between Java and Python processes (python/peers/xpeer.py on /usr/bin/python3, the
 * Java queue test mains in child JVMs, and this JVM), 1 KiB to 64 MiB, every byte verified on
 * arrival, every message taken exactly once, and every reference back with its producer.
 */
class CrossLanguageQueueTest {
    @RegisterExtension
    final TempShm shm = new TempShm();

    @TempDir
    Path tmp;

    /** Messages per size: fewer of the large ones (each is checked byte by byte on both sides). */
    private static int countOf(long size) {
        return size >= 16 * Messages.MIB ? 2 : 5;
    }

    @Test
    void javaProducerToPythonConsumer() throws Exception {
        Path ids = tmp.resolve("python.ids");
        List<Long> sent = new ArrayList<>();
        try (Refshare rs = Refshare.open(shm.config()); ShareQueue queue = rs.createQueue(8)) {
            try (PythonPeer py = PythonPeer.xpeer("consume", shm.path().toString(), queue.name(), ids.toString(), "-", "0")) {
                py.expect("READY");
                long id = 0;
                for (long size : Messages.SIZES) {
                    for (int i = 0; i < countOf(size); i++, id++) {
                        try (Tensor t = Messages.create(rs, id, size)) {
                            queue.put(t);
                        }
                        sent.add(id);
                    }
                }
                queue.endOfStream();
                assertEquals("DONE " + sent.size() + " 0", py.read());
                assertEquals(0, py.finish());
            }
            assertEquals(sent, Messages.ids(ids), "every message once, in order");
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "every reference came back");
            assertEquals(0, rs.stats().allocator().blocksInUse());
        }
    }

    @Test
    void pythonProducerToJavaConsumer() throws Exception {
        try (PythonPeer py = PythonPeer.xpeer("produce", shm.path().toString(), "8");
             Refshare rs = Refshare.open(shm.config())) {
            try (ShareQueue queue = rs.openQueue(py.expect("QUEUE"))) {
                List<Long> sizes = new ArrayList<>();
                for (long size : Messages.SIZES) {
                    py.send("PUT " + size + " " + countOf(size));
                    for (int i = 0; i < countOf(size); i++) {
                        sizes.add(size);
                    }
                }
                py.send("END");
                long seq = 0;
                while (true) {
                    Tensor t;
                    try {
                        t = queue.take();
                    } catch (QueueClosedException end) {
                        break;
                    }
                    try (t) {
                        assertEquals(Messages.PYTHON_PRODUCER << 32 | seq, Messages.verify(t.data()), "in order");
                        assertEquals(sizes.get((int) seq), t.data().byteSize());
                        seq++;
                    }
                }
                assertEquals(sizes.size(), seq);
            }
            for (int i = 0; i < Messages.SIZES.length; i++) {
                py.expect("PUT");
            }
            py.expect("ENDED");
            py.send("LIMBO 10");
            assertEquals("0", py.expect("LIMBO").split(" ")[0], "the Python producer got every block back");
            assertEquals(0, py.finish());
        }
    }

    @Test
    void pythonProducerToPythonConsumer() throws Exception {
        Path ids = tmp.resolve("python.ids");
        try (PythonPeer producer = PythonPeer.xpeer("produce", shm.path().toString(), "8")) {
            String queue = producer.expect("QUEUE");
            try (PythonPeer consumer = PythonPeer.xpeer("consume", shm.path().toString(), queue, ids.toString(), "-", "0")) {
                consumer.expect("READY");
                int total = 0;
                for (long size : Messages.SIZES) {
                    producer.send("PUT " + size + " " + countOf(size));
                    total += countOf(size);
                }
                producer.send("END");
                assertEquals("DONE " + total + " 0", consumer.read());
                assertEquals(0, consumer.finish());
                List<Long> expected = new ArrayList<>();
                for (long seq = 0; seq < total; seq++) {
                    expected.add(Messages.PYTHON_PRODUCER << 32 | seq);
                }
                assertEquals(expected, Messages.ids(ids));
            }
            for (int i = 0; i < Messages.SIZES.length; i++) {
                producer.expect("PUT");
            }
            producer.expect("ENDED");
            producer.send("LIMBO 10");
            assertEquals("0", producer.expect("LIMBO").split(" ")[0]);
            assertEquals(0, producer.finish());
        }
    }

    /** One Java and two Python consumers take from one queue at once: each message exactly once. */
    @Test
    void javaAndPythonConsumersShareOneQueue() throws Exception {
        int messages = 600;
        Path javaIds = tmp.resolve("java.ids");
        Path[] pythonIds = {tmp.resolve("python0.ids"), tmp.resolve("python1.ids")};
        try (Refshare rs = Refshare.open(shm.config()); ShareQueue queue = rs.createQueue(16)) {
            String dir = shm.path().toString();
            try (ChildJvm java = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", dir, queue.name(), javaIds.toString(), "-", "-1");
                 PythonPeer py0 = PythonPeer.xpeer("consume", dir, queue.name(), pythonIds[0].toString(), "-", "0");
                 PythonPeer py1 = PythonPeer.xpeer("consume", dir, queue.name(), pythonIds[1].toString(), "-", "0")) {
                java.expect("READY");
                py0.expect("READY");
                py1.expect("READY");
                for (long id = 0; id < messages; id++) {
                    // mostly small, every 50th a MiB: consumers of both languages meet every size
                    long size = id % 50 == 49 ? Messages.MIB : 1024 + (id % 16) * 1024;
                    try (Tensor t = Messages.create(rs, id, size)) {
                        queue.put(t);
                    }
                }
                queue.endOfStream();
                String[] javaDone = java.expect("DONE").split(" ");
                assertEquals("0", javaDone[1], "the Java consumer found no wrong byte");
                String[] done0 = py0.expect("DONE").split(" ");
                String[] done1 = py1.expect("DONE").split(" ");
                assertEquals("0", done0[1]);
                assertEquals("0", done1[1]);
                assertEquals(0, java.waitFor());
                assertEquals(0, py0.finish());
                assertEquals(0, py1.finish());
                List<Long> all = new ArrayList<>(Messages.ids(javaIds));
                List<Long> p0 = Messages.ids(pythonIds[0]);
                List<Long> p1 = Messages.ids(pythonIds[1]);
                assertEquals(Long.parseLong(javaDone[0]), all.size());
                assertEquals(Long.parseLong(done0[0]), p0.size());
                assertEquals(Long.parseLong(done1[0]), p1.size());
                System.out.printf("one queue, %d messages: Java consumer took %d, Python consumers %d and %d%n",
                        messages, all.size(), p0.size(), p1.size());
                assertTrue(!all.isEmpty() && !p0.isEmpty() && !p1.isEmpty(), "every consumer took some");
                all.addAll(p0);
                all.addAll(p1);
                Set<Long> distinct = new HashSet<>(all);
                assertEquals(all.size(), distinct.size(), "no message taken twice");
                assertEquals(messages, distinct.size(), "no message lost");
            }
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)));
            assertEquals(0, rs.stats().allocator().blocksInUse());
        }
    }

    /** Java -> Python (forwards the tensor it received) -> Java: the memory is still this process's. */
    @Test
    void pythonForwardsAJavaTensorToJava() throws Exception {
        Path forwarded = tmp.resolve("python.ids");
        Path arrived = tmp.resolve("java.ids");
        List<Long> sent = new ArrayList<>();
        try (Refshare rs = Refshare.open(shm.config());
             ShareQueue first = rs.createQueue(4);
             ShareQueue second = rs.createQueue(4)) {
            String dir = shm.path().toString();
            try (ChildJvm java = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", dir, second.name(), arrived.toString(), "-", "-1");
                 PythonPeer py = PythonPeer.xpeer("consume", dir, first.name(), forwarded.toString(), second.name(), "0")) {
                java.expect("READY");
                py.expect("READY");
                long id = 0;
                for (long size : new long[]{Messages.KIB, 64 * Messages.KIB, Messages.MIB, 16 * Messages.MIB}) {
                    for (int i = 0; i < 3; i++, id++) {
                        try (Tensor t = Messages.create(rs, id, size)) {
                            first.put(t);
                        }
                        sent.add(id);
                    }
                }
                first.endOfStream();
                assertEquals("DONE " + sent.size() + " 0", py.read());
                assertEquals(0, py.finish());
                second.endOfStream(); // the forwarder is done: the second stream ends too
                String[] done = java.expect("DONE").split(" ");
                assertEquals(sent.size(), Long.parseLong(done[0]));
                assertEquals("0", done[1], "the Java consumer found no wrong byte");
                assertEquals(0, java.waitFor());
            }
            assertEquals(sent, Messages.ids(forwarded));
            assertEquals(sent, Messages.ids(arrived));
            assertTrue(rs.awaitLimboEmpty(Duration.ofSeconds(10)), "the last release, in the Java consumer, came back");
            assertEquals(0, rs.stats().allocator().blocksInUse());
        }
    }

    /** Python -> Java (forwards the tensor it received) -> Python: the Python producer gets its memory back. */
    @Test
    void javaForwardsAPythonTensorToPython() throws Exception {
        Path forwarded = tmp.resolve("java.ids");
        Path arrived = tmp.resolve("python.ids");
        String dir = shm.path().toString();
        try (PythonPeer producer = PythonPeer.xpeer("produce", dir, "4");
             Refshare rs = Refshare.open(shm.config());
             ShareQueue second = rs.createQueue(4)) {
            String first = producer.expect("QUEUE");
            int total = 0;
            try (ChildJvm java = ChildJvm.start(ChannelChildMain.class, "QueueConsumerMain", dir, first, forwarded.toString(), second.name(), "-1");
                 PythonPeer consumer = PythonPeer.xpeer("consume", dir, second.name(), arrived.toString(), "-", "0")) {
                java.expect("READY");
                consumer.expect("READY");
                for (long size : new long[]{Messages.KIB, 64 * Messages.KIB, Messages.MIB, 16 * Messages.MIB}) {
                    producer.send("PUT " + size + " 3");
                    total += 3;
                }
                producer.send("END");
                String[] done = java.expect("DONE").split(" ");
                assertEquals(total, Long.parseLong(done[0]));
                assertEquals("0", done[1], "the Java forwarder found no wrong byte");
                assertEquals(0, java.waitFor());
                second.endOfStream();
                assertEquals("DONE " + total + " 0", consumer.read());
                assertEquals(0, consumer.finish());
            }
            List<Long> expected = new ArrayList<>();
            for (long seq = 0; seq < total; seq++) {
                expected.add(Messages.PYTHON_PRODUCER << 32 | seq);
            }
            assertEquals(expected, Messages.ids(forwarded));
            assertEquals(expected, Messages.ids(arrived));
            for (int i = 0; i < 4; i++) {
                producer.expect("PUT");
            }
            producer.expect("ENDED");
            producer.send("LIMBO 10");
            assertEquals("0", producer.expect("LIMBO").split(" ")[0], "the last release, in Python, came back");
            assertEquals(0, producer.finish());
        }
    }
}
