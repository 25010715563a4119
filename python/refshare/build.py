"""``python3 -m refshare.build``: compiles refshare's native helper now and prints its path."""
import sys

from . import native

if __name__ == "__main__":
    print(native.build(force="--force" in sys.argv[1:]))
