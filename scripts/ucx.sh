# Sourced by ./run-tests (and so by .ci/run): the UCX bridge's tests need UCX (libucx0), its
# header (libucx-dev: the struct layout check compiles against ucp.h with gcc) and iproute2
# (ip netns: two "hosts" on one machine). As root with apt, missing packages are installed;
# otherwise it stops and names them.
REFSHARE_UCX_PACKAGES="libucx0 libucx-dev ucx-utils gcc iproute2"

refshare_require_ucx() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        if [ ! -f /usr/include/ucp/api/ucp.h ]; then
            echo "refshare's UCX bridge tests need UCX 1.13+ with its headers (ucp/api/ucp.h not found)." >&2
            return 1
        fi
        return 0
    fi
    local p missing=()
    for p in $REFSHARE_UCX_PACKAGES; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        {
            echo "refshare's UCX bridge tests need these Debian packages, which are not installed: ${missing[*]}"
            echo "Install them as root:  apt-get install -y ${missing[*]}"
        } >&2
        return 1
    fi
    echo "Installing Debian packages for the UCX bridge: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
        apt-get update
        apt-get install -y --no-install-recommends "${missing[@]}"
    fi
}
