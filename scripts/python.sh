# Sourced by ./run-tests (and so by .ci/run): makes sure Debian's /usr/bin/python3 has what the
# Python package and its tests need. PyPI is not used: everything comes from Debian's packages.
# As root with apt, missing packages are installed (and listed); otherwise it stops and names them.

# numpy and torch for the tensors, pytest for the suite, gcc builds the atomics helper (cffi: the allowed set)
REFSHARE_PYTHON_PACKAGES="python3 python3-numpy python3-pytest python3-torch python3-cffi gcc"
REFSHARE_PYTHON=/usr/bin/python3

refshare_missing_python_packages() {
    local p missing=()
    for p in $REFSHARE_PYTHON_PACKAGES; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    echo "${missing[*]}"
}

refshare_require_python() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        # not Debian: accept whatever provides the modules, but say so if they are absent
        if ! "$REFSHARE_PYTHON" -c "import numpy, pytest, torch, cffi" 2>/dev/null; then
            echo "refshare's Python tests need $REFSHARE_PYTHON with numpy, pytest, torch and cffi (not found)." >&2
            return 1
        fi
        return 0
    fi
    local missing
    missing=$(refshare_missing_python_packages)
    if [ -z "$missing" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        {
            echo "refshare's Python tests need these Debian packages, which are not installed: $missing"
            echo "Install them as root:  apt-get install -y $missing"
        } >&2
        return 1
    fi
    echo "Installing Debian packages for the Python tests: $missing"
    export DEBIAN_FRONTEND=noninteractive
    # update first only when the lists are missing or installing from them fails
    if ! apt-get install -y --no-install-recommends $missing; then
        apt-get update
        apt-get install -y --no-install-recommends $missing
    fi
    "$REFSHARE_PYTHON" -c "import numpy, pytest, torch, cffi; print('python ready: numpy', numpy.__version__, '- torch', torch.__version__)"
}
