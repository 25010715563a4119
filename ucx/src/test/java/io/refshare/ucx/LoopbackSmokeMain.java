package io.refshare.ucx;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.channel.ShareQueue;
import io.refshare.tensor.DType;
import io.refshare.tensor.Tensor;

import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

public class LoopbackSmokeMain {
    public static void main(String[] args) throws Exception {
        Path a = Files.createTempDirectory(Path.of("/dev/shm"), "rsa");
        Path b = Files.createTempDirectory(Path.of("/dev/shm"), "rsb");
        BridgeSecret s = BridgeSecret.of("0123456789abcdef0123".getBytes());
        try (Refshare rsA = Refshare.open(RefshareConfig.defaults().withDirectory(a));
             Refshare rsB = Refshare.open(RefshareConfig.defaults().withDirectory(b));
             ShareQueue qb = ShareQueue.create(rsB, 8);
             BridgeReceiver r = BridgeReceiver.listen(rsB, qb, new InetSocketAddress("127.0.0.1", 13337), s, 4)) {
            System.out.println("listening");
            try (RemoteQueue q = RemoteQueue.connect(new InetSocketAddress("127.0.0.1", 13337), s)) {
                System.out.println("connected");
                for (int i = 0; i < 20; i++) {
                    try (Tensor t = rsA.allocate(DType.INT32, 1024)) {
                        t.data().fill((byte) i);
                        q.put(t);
                    }
                    try (Tensor got = qb.poll(5, TimeUnit.SECONDS)) {
                        System.out.println("got " + got + " byte " + got.data().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 100));
                    }
                }
                System.out.println(q.stats());
            }
            System.out.println(r.stats());
        }
    }
}
