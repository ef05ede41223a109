"""Arrays whose data starts on a cache line.

numpy guarantees 16-byte alignment; a large array comes from ``mmap`` through glibc's malloc and
starts 16 bytes past a page. A kernel reading it in 64-byte AVX-512 vectors then splits every
load across two cache lines. Identical programs timed 0.25 and 0.35 ms depending on where their
arrays happened to land (a 3x3 stem convolution, 2 threads, AVX-512 Xeon), so the buffers the
project allocates for kernels -- a model's constants and packed weights, the tuner's arguments --
start on a 64-byte boundary.

    a = aligned_empty((1000, 3), "float32")   # a.ctypes.data % 64 == 0
    b = aligned_copy(weights)                  # same values, aligned, C-contiguous
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ALIGN", "aligned_copy", "aligned_empty", "aligned_zeros"]

#: Bytes: one cache line, one AVX-512 register.
ALIGN = 64


def aligned_empty(shape: Any, dtype: Any) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape`` whose data starts on ``ALIGN`` bytes."""
    dtype = np.dtype(dtype)
    shape = tuple(int(extent) for extent in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_zeros(shape: Any, dtype: Any) -> np.ndarray:
    array = aligned_empty(shape, dtype)
    array[...] = 0
    return array


def aligned_copy(array: Any, fresh: bool = False) -> np.ndarray:
    """``array``'s values in a new aligned C-contiguous array (``array`` itself if it is one,
    unless ``fresh``: a copy the caller may write without touching ``array``)."""
    source = np.asarray(array)
    if not fresh and source.flags.c_contiguous and source.ctypes.data % ALIGN == 0:
        return source
    copy = aligned_empty(source.shape, source.dtype)
    copy[...] = source
    return copy
