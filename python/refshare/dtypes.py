"""Element types and their one-byte wire codes (docs/protocol.md section 7.3; Java: DType)."""
import numpy as np

from .errors import InvalidDataError


class DType:
    """One element type: its wire code, size, and numpy storage type."""
    __slots__ = ("code", "itemsize", "name", "numpy")

    def __init__(self, code, itemsize, name, numpy_dtype):
        self.code = code
        self.itemsize = itemsize
        self.name = name
        self.numpy = numpy_dtype

    def __repr__(self):
        return self.name


def _bfloat16_numpy():
    try:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return np.dtype("<u2")  # the raw 16 bits; torch() reads them as bfloat16


_ALL = [
    DType(1, 1, "bool", np.dtype("bool")),
    DType(2, 1, "uint8", np.dtype("uint8")),
    DType(3, 1, "int8", np.dtype("int8")),
    DType(4, 2, "int16", np.dtype("<i2")),
    DType(5, 4, "int32", np.dtype("<i4")),
    DType(6, 8, "int64", np.dtype("<i8")),
    DType(7, 2, "float16", np.dtype("<f2")),
    DType(8, 2, "bfloat16", _bfloat16_numpy()),
    DType(9, 4, "float32", np.dtype("<f4")),
    DType(10, 8, "float64", np.dtype("<f8")),
]
BY_CODE = {t.code: t for t in _ALL}
BY_NAME = {t.name: t for t in _ALL}
_KNOWN = ", ".join("%d=%s" % (t.code, t.name) for t in _ALL)


def from_code(code):
    t = BY_CODE.get(code)
    if t is None:
        raise InvalidDataError("unknown dtype code %d (known: %s)" % (code, _KNOWN))
    return t


def of(spec):
    """The DType for a name ("float32"), a DType, a numpy dtype or a torch dtype."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        name = spec[6:] if spec.startswith("torch.") else spec
        if name in BY_NAME:
            return BY_NAME[name]
    name = str(spec)
    if name.startswith("torch."):
        name = name[6:]
        if name in BY_NAME:
            return BY_NAME[name]
    try:
        nd = np.dtype(spec)
    except TypeError:
        nd = None
    if nd is not None and nd.byteorder != ">":
        if nd.name == "bfloat16":
            return BY_NAME["bfloat16"]
        for t in _ALL:
            if t.name != "bfloat16" and t.numpy == nd:
                return t
    raise ValueError("refshare has no dtype for %r (known: %s)" % (spec, _KNOWN))
