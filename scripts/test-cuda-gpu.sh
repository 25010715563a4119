#!/usr/bin/env bash
# Runs refshare's CUDA tests against the REAL NVIDIA driver, then the demo on the GPU.
#
# Needs: Linux with an NVIDIA GPU and its driver (libcuda.so.1; the CUDA toolkit is not
# needed), a JDK 25 and Maven 3.8+. Elsewhere the same tests run against the CUDA test
# double (built with gcc during the test run); REFSHARE_CUDA=real makes them fail instead
# of falling back when the driver cannot be used. Point REFSHARE_LIBCUDA at the driver
# library if it is not on the loader's path. Extra arguments go to Maven.
#
#   scripts/test-cuda-gpu.sh                 # device 0
#   scripts/test-cuda-gpu.sh -DskipDemo      # tests only
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/jdk.sh
refshare_find_jdk
refshare_require_maven
if command -v nvidia-smi >/dev/null 2>&1; then
    # what the results depend on: the GPUs, the driver, and compute modes (EXCLUSIVE_PROCESS or
    # PROHIBITED make refshare refuse the device)
    nvidia-smi -L || true
    nvidia-smi --query-gpu=index,name,driver_version,compute_mode,memory.total,memory.used \
        --format=csv || true
else
    echo "nvidia-smi not found; trying ${REFSHARE_LIBCUDA:-libcuda.so.1} anyway" >&2
fi
echo "Using JDK at $JAVA_HOME"
export REFSHARE_CUDA=real
skip_demo=false
args=()
for a in "$@"; do
    if [ "$a" = "-DskipDemo" ]; then skip_demo=true; else args+=("$a"); fi
done
# the tests that steer the double (CudaSafetyTest, the held-stream ordering tests) skip here;
# the ordering test that works on hardware (CudaAcrossProcessesTest.aConsumerReadsAfterALargeAsyncCopy)
# runs. ${args[@]+...}: an empty array is "unbound" under set -u in bash before 4.4.
mvn -B -ntp -pl core test -Dtest='Cuda*Test,DeviceTest' -Dsurefire.failIfNoSpecifiedTests=false ${args[@]+"${args[@]}"}
if [ "$skip_demo" = false ]; then
    ./refshare demo --device cuda --duration 5
fi
