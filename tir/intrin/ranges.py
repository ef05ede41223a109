"""Value ranges: what a program declares its integer operands hold, and what an intrinsic needs.

Some tensor intrinsics are exact only on part of their operands' dtype range: the AVX2
``x86_avx2_u7s8s32_dot_8x4`` saturates unless its uint8 operand is below 128. A desc cannot say
so (it states the arithmetic, not the data), so the registration does::

    TensorIntrin.register(name, desc, impl, ..., operand_ranges={"A": (0, 127)})

and a program declares what its integer buffer parameters hold, in a function attribute (by
parameter name, or by position among the buffer parameters, as ``layout_free_buffers``)::

    @T.script
    def qmatmul(A: T.Buffer((64, 64), "uint8"), B: T.Buffer((64, 64), "int8"), C: ...):
        T.func_attr({"value_ranges": {"A": (0, 127)}})    # 7-bit activations
        ...

Ranges are inclusive ``(low, high)`` integer pairs inside the dtype's range. A parameter with no
declaration may hold any value of its dtype. A declaration is a promise about the data, not
checked at run time (:func:`check_arrays_in_ranges` checks arrays against it on request).

:func:`check_operand_ranges` decides whether an intrinsic may compute a block of a program:
``None`` when every operand the intrinsic restricts is declared (or traced, see
:func:`buffer_value_range`) inside the range it needs, else the reason it may not::

    check_operand_ranges("x86_avx2_u7s8s32_dot_8x4", qmatmul, {"A": "A", "B": "B_packed", "C": "C"})
    # None: qmatmul declares A in [0, 127]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tir.ir import Block, Buffer, BufferLoad, BufferStore, Call, IntImm, PrimFunc, Select, post_order_visit

if TYPE_CHECKING:
    from tir.intrin import TensorIntrin

__all__ = [
    "VALUE_RANGES_ATTR",
    "buffer_value_range",
    "check_arrays_in_ranges",
    "check_operand_ranges",
    "declared_value_ranges",
    "dtype_range",
    "parse_range",
]

#: The function attribute declaring the value ranges of integer buffer parameters.
VALUE_RANGES_ATTR = "value_ranges"

#: How many copies deep :func:`buffer_value_range` follows a buffer back to a parameter.
_MAX_COPY_DEPTH = 8


def dtype_range(dtype: Any) -> tuple[int, int]:
    """The values an integer dtype holds, inclusive: ``dtype_range("uint8") == (0, 255)``."""
    from tir.ir import as_dtype

    resolved = as_dtype(dtype)
    if not resolved.is_integer or resolved.lanes != 1:
        raise ValueError(f"value ranges are for scalar integer dtypes, not {resolved}")
    return int(resolved.min_value()), int(resolved.max_value())


def parse_range(value: Any, dtype: Any, what: str) -> tuple[int, int]:
    """``value`` (a ``(low, high)`` pair of ints, inclusive) checked against ``dtype``; raises
    ``ValueError`` naming ``what`` when it is not a pair, empty, or outside the dtype.

    >>> parse_range([0, 127], "uint8", "A")
    (0, 127)
    """
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"{what}: a value range is a (low, high) pair of integers, got {value!r}")
    low, high = int(value[0]), int(value[1])
    lowest, highest = dtype_range(dtype)
    if low > high:
        raise ValueError(f"{what}: the value range ({low}, {high}) is empty (low > high)")
    if low < lowest or high > highest:
        raise ValueError(f"{what}: the value range ({low}, {high}) leaves {dtype}'s range [{lowest}, {highest}]")
    return low, high


def declared_value_ranges(func: PrimFunc) -> dict[str, tuple[int, int]]:
    """The value range of every integer buffer parameter of ``func``, by name: the one the
    ``"value_ranges"`` attribute declares, else the dtype's whole range. Raises ``ValueError``
    on a malformed declaration (an unknown or non-integer parameter, a bad range).

    >>> declared_value_ranges(qmatmul)
    {'A': (0, 127), 'B': (-128, 127), 'C': (-2147483648, 2147483647)}
    """
    params = func.buffer_params
    ranges = {b.name: dtype_range(b.dtype) for b in params if b.dtype.is_integer and b.dtype.lanes == 1}
    declared = func.attrs.get(VALUE_RANGES_ATTR)
    if declared is None:
        return ranges
    if not isinstance(declared, Mapping):
        raise ValueError(
            f"{func.name}: the {VALUE_RANGES_ATTR!r} attribute must map buffer parameters to (low, high), "
            f"got {declared!r}"
        )
    names = [b.name for b in params]
    for key, value in declared.items():
        if isinstance(key, str) and key in names:
            buffer = params[names.index(key)]
        elif isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(params):
            buffer = params[key]
        else:
            raise ValueError(
                f"{func.name}: {VALUE_RANGES_ATTR} names {key!r}, which is not a buffer parameter "
                f"(parameters: {', '.join(names)})"
            )
        if buffer.name not in ranges:
            raise ValueError(
                f"{func.name}: {VALUE_RANGES_ATTR} of {buffer.name}: {buffer.dtype} is not an integer dtype"
            )
        ranges[buffer.name] = parse_range(value, buffer.dtype, f"{func.name}: {VALUE_RANGES_ATTR} of {buffer.name}")
    return ranges


def _find_buffer(func: PrimFunc, name: str) -> Buffer | None:
    """The buffer named ``name``: a parameter, else one a block allocates."""
    for buffer in func.buffer_params:
        if buffer.name == name:
            return buffer
    found: list[Buffer] = []

    def visit(node: Any) -> None:
        if isinstance(node, Block):
            found.extend(b for b in node.alloc_buffers if b.name == name)

    post_order_visit(func.body, visit)
    return found[0] if found else None


def _writers(func: PrimFunc, buffer: Buffer) -> list[BufferStore]:
    """Every store into ``buffer`` in ``func``."""
    stores: list[BufferStore] = []

    def visit(node: Any) -> None:
        if isinstance(node, BufferStore) and node.buffer is buffer:
            stores.append(node)

    post_order_visit(func.body, visit)
    return stores


def _copied_sources(value: Any) -> list[Any] | None:
    """What a copy stores: loads and integer constants (a padding value), or None when the
    stored value is computed (its range is not traced)."""
    if isinstance(value, (BufferLoad, IntImm)):
        return [value]
    if isinstance(value, Select):
        parts = [_copied_sources(value.true_value), _copied_sources(value.false_value)]
    elif isinstance(value, Call) and value.op == "if_then_else" and len(value.args) == 3:
        parts = [_copied_sources(value.args[1]), _copied_sources(value.args[2])]
    else:
        return None
    if any(part is None for part in parts):
        return None
    return [item for part in parts for item in part]  # type: ignore[union-attr]


def buffer_value_range(func: PrimFunc, buffer: Buffer | str, _depth: int = 0) -> tuple[int, int] | None:
    """The values ``buffer`` of ``func`` may hold: a parameter's declared range (or its dtype's);
    a buffer the program fills by copying (``cache_read``, ``reindex``, ``transform_layout``,
    ``pad_einsum``: stores of loads of other buffers, or of padding constants) the union of its
    sources' ranges; else its dtype's range. None for a buffer that is not an integer one.

    >>> buffer_value_range(tensorized_qmatmul, "A_global")   # a packed copy of A
    (0, 127)
    """
    found = _find_buffer(func, buffer) if isinstance(buffer, str) else buffer
    if found is None:
        raise ValueError(f"{func.name} has no buffer named {buffer!r}")
    if not found.dtype.is_integer or found.dtype.lanes != 1:
        return None
    declared = declared_value_ranges(func)
    if any(found is param for param in func.buffer_params):
        return declared[found.name]
    whole = dtype_range(found.dtype)
    stores = _writers(func, found)
    if not stores or _depth >= _MAX_COPY_DEPTH:
        return whole
    low, high = None, None
    for store in stores:
        sources = _copied_sources(store.value)
        if sources is None:
            return whole
        for source in sources:
            if isinstance(source, IntImm):
                part: tuple[int, int] | None = (int(source.value), int(source.value))
            elif source.buffer is found or str(source.buffer.dtype) != str(found.dtype):
                return whole
            else:
                part = buffer_value_range(func, source.buffer, _depth + 1)
            if part is None:
                return whole
            low = part[0] if low is None else min(low, part[0])
            high = part[1] if high is None else max(high, part[1])
    assert low is not None and high is not None
    return max(low, whole[0]), min(high, whole[1])


def check_operand_ranges(intrin: str | TensorIntrin, func: PrimFunc, binding: Mapping[str, Buffer | str]) -> str | None:
    """Whether ``intrin`` may compute on ``func``'s data: None when, for every operand the
    intrinsic restricts (``TensorIntrin.operand_ranges``), the buffer of ``func`` bound to it
    holds only values inside the needed range; else the reason, one line.

    ``binding`` maps the intrinsic's desc parameter names (``"A"``, ``"B"``, ``"C"``) to the
    buffers of ``func`` they stand for, as Buffers or names: a parameter, or a copy of one made
    by the schedule (see :func:`buffer_value_range`). An operand the intrinsic restricts but
    ``binding`` leaves out is refused (nothing is known of its values).

    >>> check_operand_ranges("x86_avx2_u7s8s32_dot_8x4", qmatmul, {"A": "A", "B": "B", "C": "C"})   # None
    >>> check_operand_ranges("x86_avx2_u7s8s32_dot_8x4", full_range_matmul, {"A": "A"})
    "x86_avx2_u7s8s32_dot_8x4 needs its operand A in [0, 127]; A of int8_matmul may hold [0, 255] ..."
    """
    from tir.intrin import TensorIntrin

    resolved = TensorIntrin.get(intrin) if isinstance(intrin, str) else intrin
    for operand, (low, high) in sorted(resolved.operand_ranges.items()):
        needs = f"{resolved.name} needs its operand {operand} in [{low}, {high}]"
        bound = binding.get(operand)
        if bound is None:
            return f"{needs}; the binding does not say which buffer of {func.name} it reads"
        name = bound if isinstance(bound, str) else bound.name
        held = buffer_value_range(func, bound)
        if held is None:
            return f"{needs}; {name} of {func.name} is not an integer buffer"
        if held[0] < low or held[1] > high:
            return (
                f"{needs}; {name} of {func.name} may hold [{held[0]}, {held[1]}] (declare a narrower range with "
                f'T.func_attr({{"{VALUE_RANGES_ATTR}": {{"<param>": ({low}, {high})}}}}) when the data keeps it)'
            )
    return None


def check_arrays_in_ranges(func: PrimFunc, arrays: Sequence[np.ndarray]) -> None:
    """Raise ``ValueError`` when an array (one per buffer parameter, in order) holds a value
    outside its parameter's declared range, naming the parameter, the value and its position."""
    params = func.buffer_params
    if len(arrays) != len(params):
        raise ValueError(f"{func.name} takes {len(params)} buffers, got {len(arrays)} arrays")
    declared = declared_value_ranges(func)
    for buffer, array in zip(params, arrays):
        if buffer.name not in declared or not np.asarray(array).size:
            continue
        low, high = declared[buffer.name]
        values = np.asarray(array)
        bad = (values < low) | (values > high)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{func.name}: {buffer.name} holds {values[where]} at {where}, outside its declared range [{low}, {high}]"
            )
