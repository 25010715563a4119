#!/usr/bin/env bash
# Two threads on one holder, measured the way docs/holders.md reports it: on a small, shared
# VM one contended cache-line transfer costs 5 ns in some minutes and 40 ns in others, so one
# long run per benchmark compares different minutes. This runs the benchmarks interleaved,
# ROTATIONS times through the list, one short JMH run each, and prints each benchmark's median
# and the read-write lock's time divided by its time in the same rotation (median, range, and
# in how many rotations it was at least 3, the holder issue's target), and its time divided by
# the shared protocol's in the same rotation (what SharedHolder's wrapping costs over its
# protocol). A run refused because another JMH run holds /tmp/jmh.lock is retried.
#
#   scripts/holder-contention.sh [ROTATIONS]      (default 22; needs `mvn package` first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/jdk.sh"
refshare_find_jdk
jar="$root/jmh/target/benchmarks.jar"
[ -f "$jar" ] || { echo "no $jar: run 'mvn -B -ntp -DskipTests package' first" >&2; exit 1; }
rotations=${1:-22}
benchmarks=(twoAtomicAdds atomicHolder casRefCount stampedLock readWriteLock sharedProtocol sharedProtocolWithLocalWork sharedHolderTensor)
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for ((r = 1; r <= rotations; r++)); do
    for b in "${benchmarks[@]}"; do
        for ((try = 1; ; try++)); do
            out=$("$JAVA_HOME/bin/java" --sun-misc-unsafe-memory-access=allow -jar "$jar" "HolderBenchmark\.$b\$" \
                    -t 2 -f 1 -wi 1 -w 500ms -i 1 -r 1s 2>&1 || true)
            ns=$(awk -v b="HolderBenchmark.$b" '$1 == b {print $(NF - 1)}' <<< "$out")
            [ -n "$ns" ] && break
            if ! grep -q "Unable to acquire the JMH lock" <<< "$out" || [ "$try" -ge 60 ]; then
                echo "HolderBenchmark.$b reported nothing:" >&2
                tail -n 5 <<< "$out" >&2
                exit 1
            fi
            sleep 10 # another JMH run holds the lock
        done
        echo "$r $b $ns" >> "$raw"
    done
    echo "rotation $r of $rotations done" >&2
done
awk '
    function median(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { ns[$1, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++nb] = $2 } if ($1 > rot) rot = $1 }
    END {
        printf "| acquire + release, 2 threads | ns (median of %d) | readWriteLock ÷ this (median, range) | rotations ≥ 3× | this ÷ sharedProtocol (median, range) |\n|---|---:|---:|---:|---:|\n", rot
        for (k = 1; k <= nb; k++) {
            b = order[k]; n = 0; m = 0; lo = 1e9; hi = 0; met = 0; plo = 1e9; phi = 0
            for (r = 1; r <= rot; r++) {
                t[++n] = ns[r, b]
                q = ns[r, "readWriteLock"] / ns[r, b]; u[r] = q
                if (q < lo) lo = q; if (q > hi) hi = q; if (q >= 3) met++
                p = ns[r, b] / ns[r, "sharedProtocol"]; v[r] = p
                if (p < plo) plo = p; if (p > phi) phi = p
            }
            printf "| `%s` | %.1f | %.1f (%.1f – %.1f) | %d of %d | %.1f (%.1f – %.1f) |\n", b, median(t, n), median(u, rot), lo, hi, met, rot, median(v, rot), plo, phi
        }
    }' "$raw"
