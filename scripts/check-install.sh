#!/usr/bin/env bash
# Checks the README's "Installing it" and "Using it" sections as a new user meets them: a separate
# Maven project depending on the installed io.refshare:refshare-core runs the README's producer and
# consumer (one process, two threads), first on the class path, then as a named module on the
# module path. Run `mvn install -DskipTests` first. Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/jdk.sh
refshare_find_jdk
refshare_require_maven
version=$(sed -n 's:.*<version>\(.*-SNAPSHOT\)</version>.*:\1:p' pom.xml | head -1)
jar="$HOME/.m2/repository/io/refshare/refshare-core/$version/refshare-core-$version.jar"
[ -f "$jar" ] || { echo "no $jar: run mvn install -DskipTests first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/main/java/example"
cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>uses-refshare</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>25</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>io.refshare</groupId>
      <artifactId>refshare-core</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.14.0</version></plugin>
      <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
    </plugins>
  </build>
</project>
POM
# the README's snippet, with fill/use/name filled in: producer and consumer as two threads
cat > "$work/src/main/java/example/Example.java" <<'JAVA'
package example;

import io.refshare.Refshare;
import io.refshare.ShareQueue;
import io.refshare.Tensor;
import io.refshare.exceptions.QueueClosedException;
import io.refshare.tensor.DType;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;

public class Example {
    public static void main(String[] args) throws Exception {
        CompletableFuture<String> queueName = new CompletableFuture<>();
        long[] taken = new long[1];
        Thread consumer = Thread.ofPlatform().start(() -> {
            try (Refshare rs = Refshare.open();
                 ShareQueue queue = rs.openQueue(queueName.join())) {
                while (true) {
                    try (Tensor t = queue.take()) {
                        use(t.data(), taken);
                    } catch (QueueClosedException endOfStream) {
                        break;
                    }
                }
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        });
        try (Refshare rs = Refshare.open();
             ShareQueue queue = rs.createQueue(64)) {
            queueName.complete(queue.name());
            for (int i = 0; i < 1000; i++) {
                try (Tensor t = rs.allocate(DType.FLOAT32, 512, 512)) {
                    fill(t.data(), i);
                    queue.put(t);
                }
            }
        }
        consumer.join();
        if (taken[0] != 1000) {
            throw new AssertionError("took " + taken[0] + " tensors, 1000 were put");
        }
        System.out.println("README example: 1000 tensors of 1 MiB went through the queue");
    }

    static void fill(MemorySegment data, int i) {
        data.set(ValueLayout.JAVA_INT, 0, i);
    }

    static void use(MemorySegment data, long[] taken) {
        if (data.get(ValueLayout.JAVA_INT, 0) != taken[0]++) {
            throw new AssertionError("tensors out of order");
        }
    }
}
JAVA
echo "== a separate Maven project, class path"
(cd "$work" && mvn -B -q -ntp -o compile)
"$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -cp "$work/target/classes:$jar" example.Example
echo "== the same program as a named module on the module path"
mkdir -p "$work/modular/example"
cp "$work/src/main/java/example/Example.java" "$work/modular/example/"
printf 'module example {\n    requires io.refshare;\n}\n' > "$work/modular/module-info.java"
"$JAVA_HOME/bin/javac" -d "$work/mods/example" -p "$jar" "$work/modular/module-info.java" "$work/modular/example/Example.java"
"$JAVA_HOME/bin/java" --enable-native-access=io.refshare -p "$work/mods:$jar" -m example/example.Example
echo "== an engine package is not reachable from the module"
cat > "$work/modular/example/Reach.java" <<'JAVA'
package example;

class Reach {
    io.refshare.shm.ShmDirectory directory;
}
JAVA
if "$JAVA_HOME/bin/javac" -d "$work/mods2" -p "$jar" "$work/modular/module-info.java" "$work/modular/example/Reach.java" 2>"$work/err"; then
    echo "io.refshare.shm was reachable from a module that requires io.refshare" >&2
    exit 1
fi
grep -q 'not visible\|does not export' "$work/err" && echo "refused, as it should be: $(grep -m1 'error' "$work/err")"
