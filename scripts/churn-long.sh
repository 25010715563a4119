#!/usr/bin/env bash
# The churn test's longer run: one producer serving CONSUMERS successive consumer
# JVMs (default 5000) through a queue they join and leave, and a fifth as many by direct
# hand-off, LANES at a time (default 4), over counter files of 8 peer entries, mixing clean
# exits, closes with open tensors and SIGKILLs. Not part of CI: on 2 cores it takes about
# CONSUMERS / 4 seconds (5000: roughly 20 to 40 minutes). Passes when every message was taken
# exactly once with every byte verified, nothing was rejected, no count is live, the limbo is
# empty, every peer entry is free and no file is left.
#
#   scripts/churn-long.sh [CONSUMERS] [LANES]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/jdk.sh"
refshare_find_jdk
refshare_require_maven
consumers=${1:-5000}
lanes=${2:-4}
cd "$root"
# the suite's default JUnit timeout (5 minutes a test, core's junit-platform.properties) would
# end the queue half of a run this long: give each test the churn's own budget and ten minutes
exec mvn -B -ntp -pl core test -Dtest=ChurnTest -Dsurefire.failIfNoSpecifiedTests=false \
    -Drefshare.churn.consumers="$consumers" -Drefshare.churn.lanes="$lanes" \
    -Djunit.jupiter.execution.timeout.default="$((consumers * 3 + 600))s"
