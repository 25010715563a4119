# Sourced by ./refshare, ./run-tests and .ci/run: finds a JDK 25 or newer and exports JAVA_HOME.
# Order: $JAVA_HOME, then /usr/lib/jvm/*, then the java on PATH.

refshare_java_major() {
    # prints the feature version of the java binary $1 (e.g. 25), or nothing
    "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -n 1
}

refshare_find_jdk() {
    local candidates=() c major
    [ -n "${JAVA_HOME:-}" ] && candidates+=("$JAVA_HOME")
    for c in /usr/lib/jvm/*; do [ -d "$c" ] && candidates+=("$c"); done
    if command -v java >/dev/null 2>&1; then
        candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
    fi
    for c in "${candidates[@]}"; do
        [ -x "$c/bin/java" ] && [ -x "$c/bin/javac" ] || continue
        major=$(refshare_java_major "$c/bin/java")
        if [ -n "$major" ] && [ "$major" -ge 25 ]; then
            export JAVA_HOME="$c"
            return 0
        fi
    done
    {
        echo "refshare needs a JDK 25 or newer (it uses java.lang.foreign), and none was found."
        echo "Looked at: JAVA_HOME (${JAVA_HOME:-unset}), /usr/lib/jvm/*, and the java on PATH."
        echo "Install one (e.g. Temurin 25) and set JAVA_HOME to it."
    } >&2
    return 1
}

refshare_require_maven() {
    if ! command -v mvn >/dev/null 2>&1; then
        echo "refshare builds with Apache Maven (3.8 or newer), which is not on PATH. Install it (e.g. apt install maven)." >&2
        return 1
    fi
}
