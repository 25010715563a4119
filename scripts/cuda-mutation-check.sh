#!/usr/bin/env bash
# The CUDA mutation check (docs/cuda.md): introduces, one at a time, each mistake the CUDA
# tests must catch, runs the test that should catch it, and restores the file. Prints one
# line per mutation: CAUGHT (the test failed, as it must) or MISSED. Exits 1 if any was
# missed. Runs against the test double; needs a clean work tree for the files it mutates.
#
#   scripts/cuda-mutation-check.sh            # all mutations
#   scripts/cuda-mutation-check.sh free sync  # only those whose name contains a word given
#   scripts/cuda-mutation-check.sh --check    # only that each mutation still applies (its text is in
#                                             # its file, its test method exists): no build, seconds;
#                                             # CudaMutationScriptTest runs it with the suite
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=false
if [ "${1:-}" = --check ]; then
    check_only=true
    shift
else
    . scripts/jdk.sh
    refshare_find_jdk
    refshare_require_maven
fi
export REFSHARE_CUDA=double
C=core/src/main/java/io/refshare/cuda/driver
D=core/src/test/c/refshare_cuda_test_double.c
S=core/src/main/java/io/refshare/share/Sharing.java

# name | file | text to replace (every occurrence) | replacement | test (class or class#method)
MUTATIONS=(
"unversioned-name-double|$D|EXPORT CUresult cuMemAlloc_v2(|EXPORT CUresult cuMemAlloc(|CudaAbiTest"
"unversioned-name-java|$C/CudaDriver.java|\"cuMemFree_v2\"|\"cuMemFree\"|CudaAbiTest"
"wrong-constant-double|$D|#define CU_EVENT_INTERPROCESS 0x4|#define CU_EVENT_INTERPROCESS 0x8|CudaAbiTest"
"wrong-constant-java|$C/CudaDriver.java|CU_EVENT_INTERPROCESS = 0x4|CU_EVENT_INTERPROCESS = 0x8|CudaAbiTest"
"wrong-java-argument-type|$C/CudaDriver.java|m.put(\"cuIpcCloseMemHandle\", FunctionDescriptor.of(JAVA_INT, JAVA_LONG))|m.put(\"cuIpcCloseMemHandle\", FunctionDescriptor.of(JAVA_INT, JAVA_INT))|CudaAbiTest"
"free-under-importer|$S|        RuntimeException failure = null;|        receiveCache.releaseToken(counters, slot); RuntimeException failure = null; if (true) { device.release(segment); return; }|CudaSafetyTest#aProducerNeverFreesMemoryAConsumerStillHasOpen"
"missing-synchronize|$C/CudaSharing.java|                driver.memcpyDtoHAsync(dst, address, dst.byteSize(), stream);
                driver.streamSynchronize(stream);|                driver.memcpyDtoHAsync(dst, address, dst.byteSize(), stream);|CudaDriverTest#aProcessNeverIpcOpensItsOwnMemory"
"call-without-context|$C/CudaBackend.java|        try (CudaContext.Scope scope = context.enter()) {
            scope.driver().memFree(s.address());
        }|        CudaDriver.system().memFree(s.address());|CudaSafetyTest#aStaleDeviceDescriptorIsRefusedWithoutOpeningAnything"
"token-before-release|$S|        RuntimeException failure = null;|        receiveCache.releaseToken(counters, slot); if (true) { device.release(segment); return; } RuntimeException failure = null;|CudaSafetyTest#aReceivedDeviceBlockKeepsItsTokenWhenItsReleaseFails"
"open-before-claim|$S|                claimOrThrow(counters, slot, tag);
                claimed = true;
                refuseIfSenderDead(counters.owner(), d);
                mapping = dev.open(d);|                mapping = dev.open(d);
                claimOrThrow(counters, slot, tag);
                claimed = true;
                refuseIfSenderDead(counters.owner(), d);|CudaSafetyTest#aStaleDeviceDescriptorIsRefusedWithoutOpeningAnything"
"context-not-restored|$C/CudaContext.java|                driver.setCurrentContext(previous);|                driver.hashCode();|CudaSafetyTest#theCallersCurrentContextIsRestored"
"release-without-lifecycle-lock|$C/CudaSharing.java|        try (Use use = useIfOpen()) {
            if (use == null) {
                return; // close closed every segment
            }|        try (CudaContext.Scope use = context.enter()) {
            if (closed) {
                return; // close closed every segment
            }|CudaSafetyTest#closeWaitsForAReleaseInProgress"
"no-device-checks|$C/CudaContext.java|        checkSharable(driver, device, \"CUDA device \" + ordinal + \" (\" + name + \")\");||CudaSafetyTest#devicesThatCannotShareAreRefusedPlainly"
"dead-sender-unchecked|$S|                refuseIfSenderDead(counters.owner(), d);||CudaDeadSenderTest#aDeviceTensorOfAKilledSenderIsRefusedWithoutOpeningAnything"
"dead-sender-before-claim|$S|                claimOrThrow(counters, slot, tag);
                claimed = true;
                refuseIfSenderDead(counters.owner(), d);|                refuseIfSenderDead(counters.owner(), d);
                claimOrThrow(counters, slot, tag);
                claimed = true;|CudaDeadSenderTest#aDeviceTensorOfAKilledSenderIsRefusedWithoutOpeningAnything"
"unknown-sender-refused|$S|directory.verdict(sender) == Verdict.DEAD|directory.verdict(sender) != Verdict.ALIVE|CudaDeadSenderTest#aSenderNotKnownToBeDeadIsNotRefused"
"wait-without-verdict|$C/CudaSharing.java|                if (directory.verdict(d.sender()) == Verdict.DEAD) {|                if (false) {|CudaDeadSenderTest#aSenderKilledWhileTheReceiveWaitsForItsWorkIsRefusedAndTheStreamStaysUsable"
"close-keeps-waiting|$C/CudaSharing.java|            if (closing) {|            if (false) {|CudaDeadSenderTest#closingEndsAReceiveThatWaitsForALiveSendersWork"
"interrupt-ignored|$C/CudaSharing.java|            if (Thread.interrupted()) {|            if (false) {|CudaDeadSenderTest#anInterruptEndsAReceiveThatWaitsForALiveSendersWork"
)

missed=0
stale=0
for m in "${MUTATIONS[@]}"; do
    IFS='|' read -r name file old new test <<<"$(printf '%s' "$m" | tr '\n' '\001')"
    old=${old//$'\001'/$'\n'}; new=${new//$'\001'/$'\n'}; test=${test//$'\001'/}
    if [ $# -gt 0 ]; then
        wanted=false
        for w in "$@"; do case "$name" in *"$w"*) wanted=true ;; esac; done
        [ "$wanted" = true ] || continue
    fi
    if [ "$check_only" = true ]; then
        class=${test%%#*}; method=${test#*#}; [ "$method" = "$test" ] && method=
        source=$(find core/src/test/java -name "$class.java" | head -n 1)
        if ! OLD="$old" python3 -c 'import os, sys; sys.exit(os.environ["OLD"] not in open(sys.argv[1]).read())' "$file"; then
            echo "STALE   $name: its text is no longer in $file"; stale=$((stale + 1))
        elif [ -z "$source" ] || { [ -n "$method" ] && ! grep -q "void $method(" "$source"; }; then
            echo "STALE   $name: no test $test"; stale=$((stale + 1))
        else
            echo "APPLIES $name"
        fi
        continue
    fi
    git diff --quiet -- "$file" || { echo "$file has uncommitted changes: not mutating it" >&2; exit 2; }
    OLD="$old" NEW="$new" python3 - "$file" <<'PY'
import os, sys
p = sys.argv[1]; s = open(p).read(); old = os.environ["OLD"]
if old not in s:
    sys.exit("mutation text not found in " + p + ": " + old[:80])
open(p, "w").write(s.replace(old, os.environ["NEW"]))  # every occurrence: a rename is consistent
PY
    if mvn -B -q -ntp -o -pl core test -Dtest="$test" -Dsurefire.failIfNoSpecifiedTests=false >"target-mutation-$name.log" 2>&1; then
        echo "MISSED  $name: $test passed"; missed=$((missed + 1))
    else
        echo "CAUGHT  $name: $test failed ($(grep -m1 -oE '(Tests run:.*Failures: [0-9]+, Errors: [0-9]+)' "target-mutation-$name.log" || echo 'no test summary: see the build output'))"
        rm -f "target-mutation-$name.log"
    fi
    git checkout -q -- "$file"
done
exit $((missed + stale > 0))
