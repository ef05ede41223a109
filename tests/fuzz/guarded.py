"""Numpy arrays on guard-paged memory: an out-of-bounds access faults instead of passing silently.

Each array gets its own anonymous mapping: an inaccessible page (``PROT_NONE``), the pages
holding the data, and another inaccessible page. The data ends as close to the trailing
guard page as the element alignment allows, so writing or reading even one element past the
end faults (SIGSEGV). Bytes between the leading guard page and the data are filled with a
canary pattern; ``check_canaries`` reports a write that landed there (an underflow smaller
than a page). Run code on such arrays in a child process: a fault kills the process.

    arrays = GuardedArrays()
    a = arrays.copy_of(np.ones((3, 5), np.float32))
    ... run a kernel on a ...
    assert not arrays.check_canaries()
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap

import numpy as np

PAGE = mmap.PAGESIZE
_PROT_NONE = 0
_CANARY = 0xA5

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


class GuardedArrays:
    """Allocates guard-paged arrays and remembers their canary regions."""

    def __init__(self) -> None:
        self._mappings: list[mmap.mmap] = []
        self._canaries: list[tuple[str, np.ndarray]] = []

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, align: int = 1, name: str = "") -> np.ndarray:
        """An uninitialised C-contiguous array whose last byte touches a guard page."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dtype.itemsize
        align = max(align, dtype.alignment, 1)
        data_pages = _round_up(max(nbytes + align, 1), PAGE)
        total = data_pages + 2 * PAGE
        mapping = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        whole = np.frombuffer(mapping, dtype=np.uint8)
        base = whole.ctypes.data
        for start in (base, base + total - PAGE):
            if _libc.mprotect(ctypes.c_void_p(start), PAGE, _PROT_NONE) != 0:
                raise OSError(ctypes.get_errno(), "mprotect of a guard page failed")
        # Place the data's end at the trailing guard page, rounded down to the alignment.
        offset = total - PAGE - nbytes
        offset -= (base + offset) % align
        whole[PAGE:offset] = _CANARY
        self._canaries.append((name, whole[PAGE:offset]))
        self._mappings.append(mapping)
        return np.frombuffer(mapping, dtype=dtype, count=count, offset=offset).reshape(shape)

    def copy_of(self, array: np.ndarray, align: int = 1, name: str = "") -> np.ndarray:
        out = self.empty(array.shape, array.dtype, align, name)
        out[...] = array
        return out

    def check_canaries(self) -> list[str]:
        """Names of the arrays whose bytes just before the data were overwritten."""
        return [name for name, region in self._canaries if region.size and not (region == _CANARY).all()]
