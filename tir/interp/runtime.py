"""Runtime helpers called by the Python code the interpreter generates.

Value representation (the invariant every helper keeps):

- ``bool`` scalars are Python ``bool`` (or ``numpy.bool_``);
- integer scalars (int8/16/32/64, uint8) are Python ``int`` always inside their dtype's range;
- float16 / float32 / float64 scalars are the numpy scalar of that type, so that numpy's own
  scalar arithmetic rounds each operation to the dtype;
- bfloat16 scalars are ``numpy.float32`` holding a bfloat16-representable value (numpy has no
  bfloat16); bfloat16 *buffers* are ``uint16`` arrays of the raw bits;
- vectors are 1-D numpy arrays of the lane dtype (bfloat16: float32 arrays).

Every helper that rounds accepts scalars and arrays alike.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

#: numpy type used to compute with a scalar dtype.
COMPUTE_TYPES: dict[str, Any] = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "float16": np.float16,
    "bfloat16": np.float32,
    "float32": np.float32,
    "float64": np.float64,
}

#: numpy dtype of a buffer's storage (bfloat16 buffers hold the raw bits).
STORAGE_TYPES: dict[str, Any] = {**COMPUTE_TYPES, "bfloat16": np.uint16}


class InterpretError(RuntimeError):
    """A program did something the interpreter refuses to run (a binding outside its domain...)."""


# ---------------------------------------------------------------- bfloat16


def _bits_to_bf16(bits32: np.ndarray, values: np.ndarray) -> np.ndarray:
    # Round to nearest, ties to even, on the float32 bits: add 0x7FFF plus the lowest kept bit
    # and drop the low 16 bits. NaN is kept a (quiet) NaN with its sign.
    rounded = (bits32 + np.uint32(0x7FFF) + ((bits32 >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan_bits = (bits32 >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(values), nan_bits, rounded).astype(np.uint16)


def bf16_to_bits(value: Any) -> Any:
    """float32 value(s) -> uint16 bfloat16 bits, rounding to nearest even."""
    values = np.array(value, dtype=np.float32, ndmin=1)
    bits = _bits_to_bf16(values.view(np.uint32), values)
    return bits[0] if np.ndim(value) == 0 else bits


def bf16_from_bits(bits: Any) -> Any:
    """uint16 bfloat16 bits -> float32 value(s) (exact)."""
    wide = np.array(bits, dtype=np.uint32, ndmin=1) << np.uint32(16)
    values = wide.view(np.float32)
    return values[0] if np.ndim(bits) == 0 else values


def bf16_round(value: Any) -> Any:
    """Round float32 value(s) to the nearest bfloat16, returned as float32.

    Used after each float32 operation on bfloat16 operands: float32 has more than twice
    bfloat16's precision plus two bits, so rounding twice gives the correctly rounded result.
    """
    return bf16_from_bits(bf16_to_bits(value))


def to_bfloat16(value: Any) -> Any:
    """Round float64 value(s) (or ints, float16...) to bfloat16, returned as float32."""
    wide = np.array(value, dtype=np.float64, ndmin=1)
    narrow = wide.astype(np.float32)
    # A conversion (unlike an arithmetic result) is not safe to round twice, so first round
    # to float32 "to odd": when inexact, take the float32 neighbour toward zero and set its
    # last bit. Rounding that to bfloat16 then equals rounding the float64 directly.
    inexact = np.isfinite(wide) & (narrow.astype(np.float64) != wide)
    toward_zero = np.where(
        np.abs(narrow.astype(np.float64)) > np.abs(wide), np.nextafter(narrow, np.float32(0)), narrow
    )
    odd = (toward_zero.view(np.uint32) | np.uint32(1)).view(np.float32)
    narrow = np.where(inexact, odd, narrow)
    result = bf16_round(narrow)
    return result[0] if np.ndim(value) == 0 else result


# ---------------------------------------------------------------- rounding to a float dtype


def to_float64(value: Any) -> Any:
    return np.asarray(value, dtype=np.float64)[()]


def to_float32(value: Any) -> Any:
    return np.asarray(value).astype(np.float32)[()]


def to_float16(value: Any) -> Any:
    return np.asarray(value).astype(np.float16)[()]


#: Round a (float64) value to each float dtype; the generated code calls these by name.
FLOAT_ROUNDERS = {
    "float64": to_float64,
    "float32": to_float32,
    "float16": to_float16,
    "bfloat16": to_bfloat16,
}


def f64(value: Any) -> Any:
    """Widen to float64 (math functions are computed in float64, then rounded)."""
    return np.asarray(value, dtype=np.float64)


# ---------------------------------------------------------------- integers


def make_wrap(bits: int, signed: bool) -> Any:
    """A function reducing a Python int to the two's-complement range of ``bits`` bits."""
    mask = (1 << bits) - 1
    half = 1 << (bits - 1)
    if signed:

        def wrap_signed(value: int) -> int:
            return ((value + half) & mask) - half

        return wrap_signed

    def wrap_unsigned(value: int) -> int:
        return value & mask

    return wrap_unsigned


def trunc_div(a: Any, b: Any) -> Any:
    """Integer division rounding toward zero (C's ``/``), for Python ints or int arrays.

    A zero divisor gives 0 (numpy's integer convention, docs/dialect.md "Integer division");
    ``MIN / -1`` is wrapped to ``MIN`` by the caller (arrays wrap by themselves)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        quotient = a // b  # numpy: 0 where b == 0, MIN where MIN // -1 (errors are ignored)
        return quotient + ((quotient < 0) & (quotient * b != a)).astype(quotient.dtype)
    if b == 0:
        return 0
    quotient = a // b
    if quotient < 0 and quotient * b != a:
        quotient += 1
    return quotient


def floor_div(a: int, b: int) -> int:
    """Python ints ``a // b``, with 0 for a zero divisor (numpy's integer convention)."""
    return a // b if b else 0


def floor_mod(a: int, b: int) -> int:
    """Python ints ``a % b``, with 0 for a zero divisor (numpy's integer convention)."""
    return a % b if b else 0


def float_floordiv(a: Any, b: Any) -> Any:
    """Floor division of floats: ``floor(a / b)``, in the operands' dtype."""
    return np.floor(a / b)


def float_floormod(a: Any, b: Any) -> Any:
    """``a - floor(a / b) * b`` in the operands' dtype."""
    return a - np.floor(a / b) * b


def float_to_int(value: Any, dtype: str) -> Any:
    """Cast float(s) to an integer dtype, truncating toward zero and saturating.

    A value beyond the integer range becomes its nearest end and NaN becomes 0, as
    ``llvm.fptosi.sat`` / ``llvm.fptoui.sat`` do (docs/lowering.md, numerical semantics).
    """
    info = np.iinfo(STORAGE_TYPES[dtype])
    truncated = np.trunc(np.asarray(value, dtype=np.float64))
    # Compare in float64 before converting: info.max of int64 is not a float64, but the
    # comparisons pick it (or info.min) exactly for every out-of-range value.
    in_range = (truncated >= float(info.min)) & (truncated < float(info.max) + 1.0)
    safe = np.where(in_range, truncated, 0.0)
    if truncated.ndim == 0:
        if np.isnan(truncated):
            return 0
        if not in_range:
            return int(info.min) if truncated < 0 else int(info.max)
        return int(truncated)
    result = safe.astype(STORAGE_TYPES[dtype])
    result = np.where(truncated < float(info.min), info.min, result)
    result = np.where(truncated >= float(info.max) + 1.0, info.max, result)
    return result.astype(STORAGE_TYPES[dtype])


# ---------------------------------------------------------------- min / max / select


def fmin(a: Any, b: Any) -> Any:
    """Scalar float Min: ``a if a < b else b`` (with a NaN operand the result is ``b``)."""
    return a if a < b else b


def fmax(a: Any, b: Any) -> Any:
    """Scalar float Max: ``a if a > b else b`` (with a NaN operand the result is ``b``)."""
    return a if a > b else b


def vmin(a: Any, b: Any) -> Any:
    return np.where(a < b, a, b)


def vmax(a: Any, b: Any) -> Any:
    return np.where(a > b, a, b)


def select(condition: Any, true_value: Any, false_value: Any) -> Any:
    """Select: both values are already evaluated (they are arguments)."""
    if isinstance(condition, np.ndarray):
        return np.where(condition, true_value, false_value)
    return true_value if condition else false_value


def vector_if_then_else(condition: np.ndarray, true_fn: Any, false_fn: Any) -> Any:
    """if_then_else with a vector condition: a side is evaluated only if some lane takes it."""
    if np.all(condition):
        return true_fn()
    if not np.any(condition):
        return false_fn()
    return np.where(condition, true_fn(), false_fn())


# ---------------------------------------------------------------- math


def round_half_away(x: Any) -> Any:
    """``llvm.round``: to the nearest integer, halfway cases away from zero."""
    truncated = np.trunc(x)
    # x - trunc(x) is exact in floating point, so the comparison with 0.5 is exact too.
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.sign(x), truncated)


_erf = np.vectorize(math.erf, otypes=[np.float64])

#: Float math on float64 values; the caller rounds the result to the call's dtype.
MATH_F64: dict[str, Any] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": round_half_away,
    "trunc": np.trunc,
    "pow": np.power,
    "fabs": np.abs,
    "maxnum": np.fmax,
    "minnum": np.fmin,
}


def _exact_fma(a: float, b: float, c: float) -> float:
    if math.isfinite(a) and math.isfinite(b) and math.isfinite(c):
        # Fraction arithmetic is exact and float(Fraction) rounds correctly: one rounding.
        return float(Fraction(a) * Fraction(b) + Fraction(c))
    return a * b + c


_exact_fma_vector = np.vectorize(_exact_fma, otypes=[np.float64])


def fma(a: Any, b: Any, c: Any, dtype: str) -> Any:
    """``a * b + c`` rounded once to ``dtype``.

    float64 is computed exactly; the narrower types go through float64, whose product of two
    narrower values is exact, so only the final addition can round twice (exact enough).
    """
    if dtype == "float64":
        return to_float64(_exact_fma_vector(f64(a), f64(b), f64(c)))
    return FLOAT_ROUNDERS[dtype](f64(a) * f64(b) + f64(c))


def unsupported(what: str) -> Any:
    raise NotImplementedError(f"the interpreter cannot run {what}")


# ---------------------------------------------------------------- integer SIMD intrinsics
#
# The exact lane semantics of the target-specific LLVM intrinsics the built-in tensor
# intrinsics (tir/intrin/) use, so that tensorized programs run here too. LLVM does not type
# signedness: an ``<N x i8>`` operand may arrive as an int8 or a uint8 array, and each helper
# reinterprets the bytes as the instruction does. Sums are computed exactly in int64, then
# saturated or wrapped exactly as the instruction does.


def _bytes_as(values: Any, signed: bool) -> np.ndarray:
    """The lanes of an 8-bit vector as int64, read as signed or unsigned bytes."""
    array = np.asarray(values)
    if array.dtype.itemsize != 1:
        raise TypeError(f"expected a vector of 8-bit lanes, got {array.dtype}")
    return array.view(np.int8 if signed else np.uint8).astype(np.int64)


def _wrap_lanes(values: np.ndarray, dtype: Any) -> np.ndarray:
    """int64 lanes reduced modulo 2**bits to ``dtype`` (two's complement wrap-around)."""
    bits = np.dtype(dtype).itemsize * 8
    return values.astype(np.uint64).astype(np.dtype(f"uint{bits}")).view(dtype)


def _group_sums(products: np.ndarray, group: int) -> np.ndarray:
    if products.size % group:
        raise TypeError(f"{products.size} lanes do not form groups of {group}")
    return products.reshape(-1, group).sum(axis=1)


def x86_pmaddubsw(a: Any, b: Any) -> np.ndarray:
    """``vpmaddubsw`` (``llvm.x86.avx2.pmadd.ub.sw``, SSSE3 / AVX-512BW widths alike).

    Lane i of the int16 result is ``a[2i] * b[2i] + a[2i+1] * b[2i+1]`` with ``a`` read as
    unsigned and ``b`` as signed bytes, SATURATED to [-32768, 32767]: the sum of two products
    reaches 2 * 255 * 128 = 65280, so uint8 operands of 128 or more can saturate.
    """
    sums = _group_sums(_bytes_as(a, signed=False) * _bytes_as(b, signed=True), 2)
    return np.clip(sums, -32768, 32767).astype(np.int16)


def x86_pmaddwd(a: Any, b: Any) -> np.ndarray:
    """``vpmaddwd`` (``llvm.x86.avx2.pmadd.wd``): int16 pairs multiplied and summed into int32.

    Lane i is ``a[2i] * b[2i] + a[2i+1] * b[2i+1]``; the one sum that does not fit,
    2 * (-32768)**2 = 2**31, wraps to -2**31 as the instruction does.
    """
    sums = _group_sums(np.asarray(a).astype(np.int64) * np.asarray(b).astype(np.int64), 2)
    return _wrap_lanes(sums, np.int32)


def x86_phaddd(a: Any, b: Any) -> np.ndarray:
    """``vphaddd`` (``llvm.x86.avx2.phadd.d``; ``llvm.x86.ssse3.phadd.d.128``): adjacent int32
    pairs summed, per 128-bit half: ``[a0+a1, a2+a3, b0+b1, b2+b3]``, then the same of lanes
    4..7 of ``a`` and ``b`` (the 256-bit form does not cross halves); sums wrap to int32.
    """
    halves_a = np.asarray(a).astype(np.int64).reshape(-1, 4)
    halves_b = np.asarray(b).astype(np.int64).reshape(-1, 4)
    sums = np.concatenate(
        [halves_a[:, 0::2] + halves_a[:, 1::2], halves_b[:, 0::2] + halves_b[:, 1::2]], axis=1
    ).reshape(-1)
    return _wrap_lanes(sums, np.int32)


def x86_permd(values: Any, index: Any) -> np.ndarray:
    """``vpermd`` (``llvm.x86.avx2.permd``): lane i is ``values[index[i] % 8]``, across halves."""
    array = np.asarray(values)
    return array[np.asarray(index).astype(np.int64) & (array.size - 1)].astype(array.dtype)


def x86_vpdpbusd(acc: Any, a: Any, b: Any) -> np.ndarray:
    """``vpdpbusd`` (``llvm.x86.avx512.vpdpbusd.{128,256,512}``, AVX-512 VNNI / AVX-VNNI).

    Lane i is ``acc[i] + sum_{k<4} a[4i+k] * b[4i+k]`` (``a`` unsigned, ``b`` signed bytes),
    computed without intermediate saturation and wrapped to int32 (the ``vpdpbusds`` form,
    not supported here, saturates instead).
    """
    sums = _group_sums(_bytes_as(a, signed=False) * _bytes_as(b, signed=True), 4)
    return _wrap_lanes(np.asarray(acc).astype(np.int64) + sums, np.int32)


def aarch64_sdot(acc: Any, a: Any, b: Any) -> np.ndarray:
    """``sdot`` (``llvm.aarch64.neon.sdot.v4i32.v16i8`` / ``.v2i32.v8i8``, FEAT_DotProd).

    Lane i is ``acc[i] + sum_{k<4} a[4i+k] * b[4i+k]``, all signed bytes, wrapped to int32.
    """
    sums = _group_sums(_bytes_as(a, signed=True) * _bytes_as(b, signed=True), 4)
    return _wrap_lanes(np.asarray(acc).astype(np.int64) + sums, np.int32)


#: Target-specific LLVM intrinsics the interpreter runs: name (overload suffixes removed) ->
#: (runtime helper, result lane dtype, (lanes per result lane, lane bits) of each argument).
#: The translator checks a call's dtypes against this before it emits a call of the helper.
_BYTE_PAIRS, _SHORT_PAIRS, _BYTE_QUADS, _ACCUMULATOR = (2, 8), (2, 16), (4, 8), (1, 32)
SIMD_INTRINSICS: dict[str, tuple[str, str, tuple[tuple[int, int], ...]]] = {
    "llvm.x86.ssse3.pmadd.ub.sw.128": ("_x86_pmaddubsw", "int16", (_BYTE_PAIRS, _BYTE_PAIRS)),
    "llvm.x86.avx2.pmadd.ub.sw": ("_x86_pmaddubsw", "int16", (_BYTE_PAIRS, _BYTE_PAIRS)),
    "llvm.x86.avx512.pmaddubs.w.512": ("_x86_pmaddubsw", "int16", (_BYTE_PAIRS, _BYTE_PAIRS)),
    "llvm.x86.sse2.pmadd.wd": ("_x86_pmaddwd", "int32", (_SHORT_PAIRS, _SHORT_PAIRS)),
    "llvm.x86.avx2.pmadd.wd": ("_x86_pmaddwd", "int32", (_SHORT_PAIRS, _SHORT_PAIRS)),
    "llvm.x86.avx512.pmaddw.d.512": ("_x86_pmaddwd", "int32", (_SHORT_PAIRS, _SHORT_PAIRS)),
    "llvm.x86.ssse3.phadd.d.128": ("_x86_phaddd", "int32", (_ACCUMULATOR, _ACCUMULATOR)),
    "llvm.x86.avx2.phadd.d": ("_x86_phaddd", "int32", (_ACCUMULATOR, _ACCUMULATOR)),
    "llvm.x86.avx2.permd": ("_x86_permd", "int32", (_ACCUMULATOR, _ACCUMULATOR)),
    "llvm.x86.avx512.vpdpbusd.128": ("_x86_vpdpbusd", "int32", (_ACCUMULATOR, _BYTE_QUADS, _BYTE_QUADS)),
    "llvm.x86.avx512.vpdpbusd.256": ("_x86_vpdpbusd", "int32", (_ACCUMULATOR, _BYTE_QUADS, _BYTE_QUADS)),
    "llvm.x86.avx512.vpdpbusd.512": ("_x86_vpdpbusd", "int32", (_ACCUMULATOR, _BYTE_QUADS, _BYTE_QUADS)),
    "llvm.aarch64.neon.sdot": ("_aarch64_sdot", "int32", (_ACCUMULATOR, _BYTE_QUADS, _BYTE_QUADS)),
}


# ---------------------------------------------------------------- vectors


def ramp(base: Any, stride: Any, lanes: int, dtype: str) -> np.ndarray:
    """``[base, base + stride, ...]`` as an array of ``dtype`` (integers wrap like C)."""
    return (base + stride * np.arange(lanes)).astype(COMPUTE_TYPES[dtype])


def broadcast(value: Any, lanes: int, dtype: str) -> np.ndarray:
    return np.full(lanes, value, dtype=COMPUTE_TYPES[dtype])


def _mesh(index: tuple[Any, ...]) -> tuple[Any, ...]:
    # Several vector indices form an outer product (the first vector axis varies slowest);
    # give the k-th vector index its own numpy axis so fancy indexing broadcasts them.
    vector_axes = [axis for axis, item in enumerate(index) if isinstance(item, np.ndarray)]
    out = list(index)
    for k, axis in enumerate(vector_axes):
        shape = [1] * len(vector_axes)
        shape[k] = -1
        out[axis] = index[axis].reshape(shape)
    return tuple(out)


def vector_load(array: np.ndarray, index: tuple[Any, ...]) -> np.ndarray:
    """Load with more than one vector index: lanes in row-major order of the vector axes."""
    return array[_mesh(index)].reshape(-1)


def vector_store(array: np.ndarray, index: tuple[Any, ...], value: np.ndarray) -> None:
    shape = [item.size for item in index if isinstance(item, np.ndarray)]
    array[_mesh(index)] = np.reshape(value, shape)


# ---------------------------------------------------------------- checks


def _format_index(index: tuple[Any, ...]) -> str:
    return "[" + ", ".join(str(list(i)) if isinstance(i, np.ndarray) else str(i) for i in index) + "]"


def check_index(array: np.ndarray, index: tuple[Any, ...], buffer_name: str) -> tuple[Any, ...]:
    """Refuse an out-of-bounds access; returns ``index``.

    numpy would raise for a too large index but silently wrap a negative one around, so both
    sides are checked here, before numpy sees the index.
    """
    for item, size in zip(index, array.shape):
        if isinstance(item, np.ndarray):
            bad = item.size > 0 and (item.min() < 0 or item.max() >= size)
        else:
            bad = not 0 <= item < size
        if bad:
            raise IndexError(
                f"out-of-bounds access {buffer_name}{_format_index(index)}: "
                f"buffer {buffer_name} has shape {tuple(array.shape)}"
            )
    return index


def iter_out_of_domain(block: str, var: str, value: int, start: int, extent: int) -> None:
    raise InterpretError(
        f"block {block!r}: iterator {var} is bound to {value}, outside its domain [{start}, {start + extent})"
    )


# ---------------------------------------------------------------- buffers


def poison_fill(array: np.ndarray, dtype: str) -> None:
    """Fill fresh storage with a value that shows up when read before written."""
    if dtype in ("float16", "float32", "float64"):
        array.fill(np.nan)
    elif dtype == "bfloat16":
        array.fill(0x7FC0)  # bfloat16 quiet NaN
    elif dtype == "bool":
        array.fill(True)
    else:
        # 0x5B in every byte: 91 for int8, 0x5B5B5B5B for int32, ...
        array.reshape(-1).view(np.uint8).fill(0x5B)


def alloc(shape: tuple[int, ...], dtype: str, poison: bool, strides: tuple[int, ...] | None = None) -> np.ndarray:
    """Fresh storage for a buffer: poisoned when asked, else zeros. ``strides`` in elements."""
    for extent in shape:
        if extent < 0:
            raise InterpretError(f"allocation of a buffer with negative shape {shape}")
    storage = STORAGE_TYPES[dtype]
    if strides:
        # Explicit strides: a strided view of a flat allocation big enough for the last element.
        size = 1 + sum((extent - 1) * stride for extent, stride in zip(shape, strides)) if all(shape) else 0
        flat = np.empty(size, dtype=storage)
        array = np.lib.stride_tricks.as_strided(flat, shape, [s * flat.itemsize for s in strides])
        target = flat
    else:
        array = target = np.empty(shape, dtype=storage)
    if poison:
        poison_fill(target, dtype)
    else:
        target.fill(0)
    return array


def match_region(
    source: np.ndarray,
    region: tuple[tuple[int, int], ...],
    shape: tuple[int, ...] | None,
    buffer_name: str,
    source_name: str,
) -> np.ndarray:
    """The view of ``source[region]`` a ``match_buffer`` binds, reshaped to ``shape``.

    ``region`` is ``(min, extent)`` per axis. The shape must equal the region's extents, or
    equal them once unit dimensions are dropped on both sides; ``shape=None`` keeps the
    region's extents (the match buffer binds its shape variables to them).
    """
    if any(extent < 0 for _, extent in region):
        raise InterpretError(f"match_buffer {buffer_name}: negative extent in region {region}")
    for (start, extent), size in zip(region, source.shape):
        if start < 0 or start + extent > size:
            text = ", ".join(f"{lo}:{lo + ext}" for lo, ext in region)
            raise IndexError(
                f"match_buffer {buffer_name}: region {source_name}[{text}] is out of bounds "
                f"of {source_name} with shape {tuple(source.shape)}"
            )
    view = source[tuple(slice(start, start + extent) for start, extent in region)]
    if shape is None or view.shape == tuple(shape):
        return view
    if [d for d in view.shape if d != 1] != [d for d in shape if d != 1]:
        raise InterpretError(
            f"match_buffer {buffer_name}: shape {tuple(shape)} does not match the region of "
            f"{source_name} with extents {view.shape}"
        )
    reshaped = view.reshape(shape)
    # Dropping or adding unit dimensions never needs a copy; a copy would break the aliasing.
    assert reshaped.size == 0 or np.may_share_memory(reshaped, view), "match_buffer view was copied"
    return reshaped


def element_strides(array: np.ndarray) -> tuple[int, ...]:
    """The strides of ``array`` in elements."""
    return tuple(stride // array.itemsize for stride in array.strides)


def element_offset(view: np.ndarray, source: np.ndarray, source_offset: int) -> int:
    """The element offset of ``view`` within the storage that ``source`` starts at."""
    delta = view.__array_interface__["data"][0] - source.__array_interface__["data"][0]
    return source_offset + delta // view.itemsize


def check_strides(array: np.ndarray, expected: tuple[int | None, ...], buffer_name: str) -> None:
    """Strides declared by a buffer (None: free) must be the array's, except on unit axes."""
    actual = element_strides(array)
    for axis, (want, have, extent) in enumerate(zip(expected, actual, array.shape)):
        if want is not None and extent != 1 and want != have:
            raise InterpretError(
                f"buffer {buffer_name}: declared strides {expected} but the data has strides "
                f"{actual} (elements); axis {axis} differs"
            )


#: Names the generated code refers to (besides its own constants and ``np`` / ``math``).
def tile_op(op: str, refs: list[tuple[np.ndarray, tuple[int, ...], tuple[int, int]] | None], values: list[Any]) -> None:
    """A CUDA warp-level tile op (tir.ir.ops: ``wmma_*`` / ``ptx_*``) on plain arrays.

    Each reference is ``(array, first element, (rows, cols))``: the tile
    ``array[..., r:r + rows, c:c + cols]``; fragments are just arrays of their logical values.
    Loads and stores copy the tile, fills fill it, mma computes ``D = A @ B + C`` in the
    accumulator's dtype (float32 products of float16 values are exact: one rounding per sum).
    """

    def tile(k: int) -> np.ndarray:
        ref = refs[k]
        assert ref is not None
        array, start, (rows, cols) = ref
        lead = tuple(start[:-2])
        r, c = start[-2], start[-1]
        return array[lead + (slice(r, r + rows), slice(c, c + cols))]  # type: ignore[no-any-return]

    if op in ("wmma_fill_fragment", "ptx_mma_fill"):
        tile(0)[...] = values[1]
    elif op in ("wmma_load_matrix_sync", "ptx_ldmatrix"):
        tile(0)[...] = tile(1)
    elif op in ("wmma_store_matrix_sync", "ptx_mma_store"):
        tile(0)[...] = tile(1)
    elif op in ("wmma_mma_sync", "ptx_mma_sync"):
        d, a, b, c = tile(0), tile(1), tile(2), tile(3)
        d[...] = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(d.dtype)
    else:
        raise NotImplementedError(f"tile op {op}")


def cp_async(
    dst: np.ndarray, dst_start: tuple[int, ...], src: np.ndarray, src_start: tuple[int, ...], count: int
) -> None:
    """``ptx_cp_async``: copy ``count`` elements along the last axis (cp.async, completed at once)."""
    dst_index = tuple(dst_start[:-1]) + (slice(dst_start[-1], dst_start[-1] + count),)
    src_index = tuple(src_start[:-1]) + (slice(src_start[-1], src_start[-1] + count),)
    dst[dst_index] = src[src_index]


HELPERS: dict[str, Any] = {
    "np": np,
    "_tile_op": tile_op,
    "_cp_async": cp_async,
    "math": math,
    "_bf16_round": bf16_round,
    "_bf16_from_bits": bf16_from_bits,
    "_bf16_to_bits": bf16_to_bits,
    "_to_float64": to_float64,
    "_to_float32": to_float32,
    "_to_float16": to_float16,
    "_to_bfloat16": to_bfloat16,
    "_f64": f64,
    "_tdiv": trunc_div,
    "_floordiv0": floor_div,
    "_floormod0": floor_mod,
    "_ffloordiv": float_floordiv,
    "_ffloormod": float_floormod,
    "_float_to_int": float_to_int,
    "_fmin": fmin,
    "_fmax": fmax,
    "_vmin": vmin,
    "_vmax": vmax,
    "_select": select,
    "_vif": vector_if_then_else,
    "_fma": fma,
    "_unsupported": unsupported,
    "_x86_pmaddubsw": x86_pmaddubsw,
    "_x86_pmaddwd": x86_pmaddwd,
    "_x86_phaddd": x86_phaddd,
    "_x86_permd": x86_permd,
    "_x86_vpdpbusd": x86_vpdpbusd,
    "_aarch64_sdot": aarch64_sdot,
    "_ramp": ramp,
    "_broadcast": broadcast,
    "_vload": vector_load,
    "_vstore": vector_store,
    "_chk": check_index,
    "_iter_error": iter_out_of_domain,
    "_alloc": alloc,
    "_match": match_region,
    "_estrides": element_strides,
    "_eoffset": element_offset,
    "_check_strides": check_strides,
}
for _name, _fn in MATH_F64.items():
    HELPERS[f"_m_{_name}"] = _fn
for _dtype, _bits, _signed in (
    ("int8", 8, True),
    ("int16", 16, True),
    ("int32", 32, True),
    ("int64", 64, True),
    ("uint8", 8, False),
):
    HELPERS[f"_wrap_{_dtype}"] = make_wrap(_bits, _signed)
