"""Structural equality and hashing, modulo the renaming of variables and buffers.

Two programs are structurally equal when they have the same shape of nodes, the same
constants, dtypes, block names and annotations, and a one-to-one correspondence between
their variables and buffers. Names of variables and buffers do not matter, spans never do.

A variable or buffer may be put in correspondence where it is defined (function
parameters, loop variables, block iterators, ``Let`` variables, allocated and matched
buffers). Elsewhere a free variable must be the same object on both sides, unless
``map_free_vars=True``, which maps free variables on first sight as well.

``structural_hash`` numbers variables and buffers in order of first appearance, so it is
consistent with ``structural_equal`` and stable across processes (the tuning database
keys records by it).
"""

from __future__ import annotations

import enum
import hashlib
import math
import struct
from typing import Any

from tir.ir.buffer import Buffer
from tir.ir.dtype import DataType
from tir.ir.expr import FloatImm, IntImm, StringImm, Var
from tir.ir.function import IRModule, PrimFunc
from tir.ir.node import Node

_VAR_DEF_FIELDS = {("For", "loop_var"), ("IterVar", "var"), ("Let", "var"), ("LetStmt", "var")}
_BUFFER_DEF_FIELDS = {("Block", "alloc_buffers"), ("MatchBufferRegion", "buffer"), ("Allocate", "buffer")}


class StructuralMismatch(AssertionError):
    """Raised by ``assert_structural_equal``: names the path and both sides."""


class _Mismatch(Exception):
    def __init__(self, path: str, lhs: Any, rhs: Any, reason: str) -> None:
        super().__init__(reason)
        self.path, self.lhs, self.rhs, self.reason = path, lhs, rhs, reason


class _EqualChecker:
    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.l2r: dict[int, Any] = {}
        self.r2l: dict[int, Any] = {}
        self.path: list[str] = []

    def fail(self, lhs: Any, rhs: Any, reason: str) -> None:
        raise _Mismatch("".join(self.path) or "<root>", lhs, rhs, reason)

    def bind(self, lhs: Any, rhs: Any) -> None:
        mapped = self.l2r.get(id(lhs))
        if mapped is not None:
            if mapped is not rhs:
                self.fail(lhs, rhs, "defined twice, mapped to different objects")
            return
        if id(rhs) in self.r2l:
            self.fail(lhs, rhs, "right-hand object already corresponds to another left-hand object")
        self.l2r[id(lhs)] = rhs
        self.r2l[id(rhs)] = lhs
        # Keep the objects alive so their ids stay unique while we compare.
        self._keep = getattr(self, "_keep", [])
        self._keep.append((lhs, rhs))

    # ---------------------------------------------------------------- vars and buffers

    def var(self, lhs: Var, rhs: Var, defining: bool) -> None:
        if lhs.dtype != rhs.dtype:
            self.fail(lhs, rhs, f"dtype {lhs.dtype} vs {rhs.dtype}")
        mapped = self.l2r.get(id(lhs))
        if mapped is not None:
            if mapped is not rhs:
                self.fail(lhs, rhs, f"variable {lhs.name} corresponds to {mapped.name}, not {rhs.name}")
            return
        if defining or self.map_free_vars:
            self.bind(lhs, rhs)
        elif lhs is not rhs:
            self.fail(lhs, rhs, f"free variables {lhs.name} and {rhs.name} differ")

    def buffer(self, lhs: Buffer, rhs: Buffer, defining: bool) -> None:
        mapped = self.l2r.get(id(lhs))
        if mapped is not None:
            if mapped is not rhs:
                self.fail(lhs, rhs, f"buffer {lhs.name} corresponds to {mapped.name}, not {rhs.name}")
            return
        if not (defining or self.map_free_vars) and lhs is not rhs:
            self.fail(lhs, rhs, f"free buffers {lhs.name} and {rhs.name} differ")
        self.buffer_fields(lhs, rhs)
        self.bind(lhs, rhs)

    def buffer_fields(self, lhs: Buffer, rhs: Buffer) -> None:
        for name in ("dtype", "scope", "align", "offset_factor", "axis_separators"):
            if getattr(lhs, name) != getattr(rhs, name):
                self.fail(lhs, rhs, f"buffer {name}: {getattr(lhs, name)} vs {getattr(rhs, name)}")
        saved = self.map_free_vars
        self.map_free_vars = True  # symbolic shape variables are defined by the buffer
        try:
            self.field("shape", lhs.shape, rhs.shape)
            self.field("strides", lhs.strides, rhs.strides)
            self.field("elem_offset", lhs.elem_offset, rhs.elem_offset)
        finally:
            self.map_free_vars = saved

    # ---------------------------------------------------------------- generic

    def field(self, name: str, lhs: Any, rhs: Any, defining: bool = False) -> None:
        self.path.append(f".{name}")
        try:
            self.value(lhs, rhs, defining)
        finally:
            self.path.pop()

    def value(self, lhs: Any, rhs: Any, defining: bool = False) -> None:
        if isinstance(lhs, Node) or isinstance(rhs, Node):
            self.node(lhs, rhs, defining)
        elif isinstance(lhs, tuple) or isinstance(rhs, tuple):
            if not (isinstance(lhs, tuple) and isinstance(rhs, tuple)) or len(lhs) != len(rhs):
                self.fail(lhs, rhs, "sequences of different length")
            for index, (a, b) in enumerate(zip(lhs, rhs)):
                self.path.append(f"[{index}]")
                try:
                    self.value(a, b, defining)
                finally:
                    self.path.pop()
        elif isinstance(lhs, dict) or isinstance(rhs, dict):
            if not (isinstance(lhs, dict) and isinstance(rhs, dict)) or set(lhs) != set(rhs):
                self.fail(lhs, rhs, "annotations with different keys")
            for key in sorted(lhs, key=str):
                self.path.append(f"[{key!r}]")
                try:
                    self.value(lhs[key], rhs[key])
                finally:
                    self.path.pop()
        elif isinstance(lhs, list) and isinstance(rhs, list):
            self.value(tuple(lhs), tuple(rhs))
        elif isinstance(lhs, float) and isinstance(rhs, float):
            if not (lhs == rhs or (math.isnan(lhs) and math.isnan(rhs))):
                self.fail(lhs, rhs, f"{lhs!r} vs {rhs!r}")
        elif type(lhs) is not type(rhs) or lhs != rhs:
            self.fail(lhs, rhs, f"{lhs!r} vs {rhs!r}")

    def node(self, lhs: Any, rhs: Any, defining: bool) -> None:
        if type(lhs) is not type(rhs):
            self.fail(lhs, rhs, f"node kinds differ: {type(lhs).__name__} vs {type(rhs).__name__}")
        if lhs is rhs and not isinstance(lhs, (Var, Buffer)) and not self.l2r:
            return
        if isinstance(lhs, Var):
            self.var(lhs, rhs, defining)
            return
        if isinstance(lhs, Buffer):
            self.buffer(lhs, rhs, defining)
            return
        if isinstance(lhs, (IntImm, FloatImm, StringImm)):
            if lhs.dtype != rhs.dtype:
                self.fail(lhs, rhs, f"constant dtypes {lhs.dtype} vs {rhs.dtype}")
            self.value(lhs.value, rhs.value)
            return
        if isinstance(lhs, PrimFunc):
            self.prim_func(lhs, rhs)
            return
        cls_name = type(lhs).__name__
        for name in _definitions_first(type(lhs)):
            if cls_name == "Block" and name == "name":
                if lhs.name != rhs.name:
                    self.fail(lhs, rhs, f"block names {lhs.name!r} vs {rhs.name!r}")
                continue
            self.field(
                name,
                getattr(lhs, name),
                getattr(rhs, name),
                defining=(cls_name, name) in _VAR_DEF_FIELDS or (cls_name, name) in _BUFFER_DEF_FIELDS,
            )

    def prim_func(self, lhs: PrimFunc, rhs: PrimFunc) -> None:
        if len(lhs.params) != len(rhs.params):
            self.fail(lhs, rhs, f"{len(lhs.params)} vs {len(rhs.params)} parameters")
        # Scalar parameters first: buffer shapes may refer to them.
        for index, (a, b) in enumerate(zip(lhs.params, rhs.params)):
            if isinstance(a, Var) or isinstance(b, Var):
                self.path.append(f".params[{index}]")
                try:
                    self.node(a, b, defining=True)
                finally:
                    self.path.pop()
        for index, (a, b) in enumerate(zip(lhs.params, rhs.params)):
            if isinstance(a, Buffer):
                self.path.append(f".params[{index}]")
                try:
                    self.node(a, b, defining=True)
                finally:
                    self.path.pop()
        self.field("body", lhs.body, rhs.body)
        self.field("attrs", lhs.attrs, rhs.attrs)


def _definitions_first(cls: type[Node]) -> tuple[str, ...]:
    """A node's fields in comparison order: a block's buffer definitions before their uses
    (its body uses ``alloc_buffers`` / ``match_buffers``, which come after it in the dataclass)."""
    fields = cls.child_fields()
    if cls.__name__ != "Block":
        return fields
    # Iterators first still: a matched region may use them.
    first = ("name", "iter_vars", "alloc_buffers", "match_buffers")
    return first + tuple(name for name in fields if name not in first)


def _find_mismatch(lhs: Any, rhs: Any, map_free_vars: bool) -> _Mismatch | None:
    checker = _EqualChecker(map_free_vars)
    try:
        if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
            if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)) or set(lhs.functions) != set(rhs.functions):
                return _Mismatch("<root>", lhs, rhs, "modules with different function names")
            for name in sorted(lhs.functions):
                checker.path = [f"[{name!r}]"]
                checker.value(lhs.functions[name], rhs.functions[name])
        else:
            checker.value(lhs, rhs)
    except _Mismatch as mismatch:
        return mismatch
    return None


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """Whether two IR objects are equal modulo renaming of variables and buffers."""
    return _find_mismatch(lhs, rhs, map_free_vars) is None


def _show(obj: Any) -> str:
    try:
        text = str(obj)
    except Exception:  # printing must never hide the mismatch itself
        text = repr(obj)
    return text if len(text) < 2000 else text[:2000] + " ..."


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise ``StructuralMismatch`` naming the first differing pair of nodes."""
    mismatch = _find_mismatch(lhs, rhs, map_free_vars)
    if mismatch is not None:
        raise StructuralMismatch(
            f"not structurally equal at {mismatch.path}: {mismatch.reason}\n"
            f"--- left:\n{_show(mismatch.lhs)}\n--- right:\n{_show(mismatch.rhs)}"
        )


class _Hasher:
    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.keep: list[Any] = []
        self.out: list[str] = []

    def number(self, obj: Any) -> int | None:
        return self.numbers.get(id(obj))

    def assign(self, obj: Any) -> int:
        index = len(self.numbers)
        self.numbers[id(obj)] = index
        self.keep.append(obj)
        return index

    def value(self, value: Any) -> None:
        out = self.out
        if isinstance(value, Var):
            index = self.number(value)
            if index is None:
                index = self.assign(value)
            out.append(f"v{index}:{value.dtype}")
        elif isinstance(value, Buffer):
            index = self.number(value)
            if index is None:
                index = self.assign(value)
                out.append(f"B{index}({value.dtype},{value.scope},{value.align},{value.offset_factor}")
                self.value(value.shape)
                self.value(value.strides)
                self.value(value.elem_offset)
                if value.axis_separators:  # only when set, so that other hashes stay as they were
                    out.append(f"sep{value.axis_separators}")
                out.append(")")
            else:
                out.append(f"b{index}")
        elif isinstance(value, PrimFunc):
            out.append("PrimFunc(")
            for param in value.params:
                if isinstance(param, Var):
                    self.value(param)
            for param in value.params:
                if isinstance(param, Buffer):
                    self.value(param)
            self.value(value.body)
            self.value(value.attrs)
            out.append(")")
        elif isinstance(value, (IntImm, StringImm)):
            out.append(f"{type(value).__name__}({value.value!r},{value.dtype})")
        elif isinstance(value, FloatImm):
            bits = struct.pack("<d", value.value).hex() if not math.isnan(value.value) else "nan"
            out.append(f"F({bits},{value.dtype})")
        elif isinstance(value, Node):
            out.append(type(value).__name__ + "(")
            for name in type(value).child_fields():
                self.value(getattr(value, name))
                out.append(",")
            out.append(")")
        elif isinstance(value, (tuple, list)):
            out.append("[")
            for item in value:
                self.value(item)
                out.append(",")
            out.append("]")
        elif isinstance(value, dict):
            out.append("{")
            for key in sorted(value, key=str):
                out.append(repr(key) + ":")
                self.value(value[key])
                out.append(",")
            out.append("}")
        elif isinstance(value, float):
            out.append("nan" if math.isnan(value) else struct.pack("<d", value).hex())
        elif isinstance(value, (DataType, enum.Enum)):
            out.append(str(value))
        else:
            out.append(repr(value))


def structural_hash(node: Any) -> int:
    """A 63-bit hash, equal for structurally equal objects and stable across processes."""
    hasher = _Hasher()
    if isinstance(node, IRModule):
        for name in sorted(node.functions):
            hasher.out.append(repr(name))
            hasher.value(node.functions[name])
    else:
        hasher.value(node)
    digest = hashlib.blake2b("".join(hasher.out).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
