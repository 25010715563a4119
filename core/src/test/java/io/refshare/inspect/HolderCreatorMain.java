package io.refshare.inspect;

import io.refshare.Refshare;
import io.refshare.RefshareConfig;
import io.refshare.SharedHolder;
import io.refshare.Tensor;

import java.nio.file.Path;

/**
 * Creates a shared holder in the directory named on its command line, publishes one
 * version, prints the holder's name and waits for stdin to close (tests kill it, to leave a
 * holder whose creator is dead).
 */
public final class HolderCreatorMain {
    static void run(String[] args) throws Exception {
        try (Refshare rs = Refshare.open(RefshareConfig.defaults().withDirectory(Path.of(args[0])));
             SharedHolder holder = rs.createHolder(4, 4)) {
            try (Tensor t = rs.allocateBytes(4096)) {
                holder.publish(t);
            }
            System.out.println(holder.name());
            System.out.flush();
            while (System.in.read() >= 0) {
                // wait until the test is done with us
            }
        }
    }
}
