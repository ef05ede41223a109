"""Which loops LLVM's loop vectorizer must leave alone.

LLVM 22's loop vectorizer (llvmlite 0.50) miscompiles loops that carry a dependence through
memory at an address computed by division or modulo of the loop variable. For::

    for h, f in T.grid(4, 36):
        pool[h * 8 + f % 4 * 2] = T.max(pool[h * 8 + f % 4 * 2], data[f])

instcombine rewrites the address as ``(h << 3) | ((f << 1) & 6)``, and the dependence analysis
then takes it for the increasing sequence ``h * 8 + f * 2`` (its only run-time check is for a
pointer wrapping around): the vector loop gathers the 4 elements for 16 iterations at once and
scatters 16 results, so 12 of the 16 updates are lost. At ``-O0``, or with the vectorizer off,
the same IR is right. The fuzzer found it after ``fuse`` and ``reorder`` put a spatial axis and
two reduction axes of a max pool into one loop
(``tests/fuzz/reproducers/reorder_fused_reduction_llvm_vectorizer.json``).

The code generator marks such a loop ``llvm.loop.vectorize.enable = false``: a loop that stores
into a buffer which its body also accesses at an index that depends on the loop variable other
than affinely (through a division, a modulo, min / max, a product of two factors that both
depend on it, a narrowing cast, a bit operation, a select, a load...). LLVM's dependence
analysis handles affine addresses (add-recurrences) soundly; a buffer whose only access is one
store carries no dependence to get wrong (a scatter writes its lanes in order). Loops the schedule vectorizes are
vectorized in TIR (``tir.transform.vectorize_loops``), so this costs only LLVM's own
vectorization of such scalar loops.
"""

from __future__ import annotations

from dataclasses import dataclass

from tir.ir import (
    Add,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    For,
    IRVisitor,
    Let,
    LetStmt,
    Mul,
    PrimExpr,
    Ramp,
    Stmt,
    Sub,
    Var,
)

__all__ = ["vectorize_off_by_loop"]

_NONE: frozenset[Var] = frozenset()


@dataclass(frozen=True)
class _Uses:
    """The variables an index uses: ``affine`` only through sums, differences, products by
    terms free of the variable and widening casts; ``opaque`` in any other way."""

    affine: frozenset[Var] = _NONE
    opaque: frozenset[Var] = _NONE

    @property
    def all(self) -> frozenset[Var]:
        return self.affine | self.opaque

    def union(self, other: _Uses) -> _Uses:
        opaque = self.opaque | other.opaque
        return _Uses((self.affine | other.affine) - opaque, opaque)

    def made_opaque(self) -> _Uses:
        return _Uses(_NONE, self.all) if self.affine else self


_NO_USES = _Uses()


@dataclass
class _Accesses:
    """One buffer's accesses under one loop."""

    stores: int = 0
    accesses: int = 0
    opaque: bool = False


class _Walker(IRVisitor):
    """One pass over a statement: for each loop, how its body accesses each buffer."""

    def __init__(self) -> None:
        self.lets: dict[Var, PrimExpr] = {}
        self.memo: dict[int, _Uses] = {}
        self.loops: list[For] = []
        self.accesses: dict[For, dict[Buffer, _Accesses]] = {}

    # ------------------------------------------------------------ expressions

    def uses(self, expr: PrimExpr) -> _Uses:
        key = id(expr)  # the nodes live in the walked tree, so their ids stay unique
        if key not in self.memo:
            self.memo[key] = self._uses(expr)
        return self.memo[key]

    def _uses(self, expr: PrimExpr) -> _Uses:
        if isinstance(expr, Var):
            value = self.lets.get(expr)
            return _Uses(frozenset((expr,))) if value is None else self.uses(value)
        if isinstance(expr, (Add, Sub, Ramp, Broadcast)):
            result = _NO_USES
            for child in _children(expr):
                result = result.union(self.uses(child))
            return result
        if isinstance(expr, Mul):
            a, b = self.uses(expr.a), self.uses(expr.b)
            both = a.all & b.all  # a product of two functions of one variable
            joined = a.union(b)
            return _Uses(joined.affine - both, joined.opaque | both) if both else joined
        if isinstance(expr, Cast):
            inner = self.uses(expr.value)
            # A truncation wraps around: the masked induction variable of the module docstring.
            return inner.made_opaque() if expr.dtype.bits < expr.value.dtype.bits else inner
        if isinstance(expr, Let):
            self.lets[expr.var] = expr.value
            return self.uses(expr.body)
        result = _NO_USES
        for child in _children(expr):
            result = result.union(self.uses(child))
        return result.made_opaque()

    # ------------------------------------------------------------ statements

    def record(self, buffer: Buffer, indices: tuple[PrimExpr, ...], store: bool) -> None:
        opaque: frozenset[Var] = _NONE
        for index in indices:
            opaque |= self.uses(index).opaque
        innermost = len(self.loops) - 1
        for depth, loop in enumerate(self.loops):
            entry = self.accesses[loop].setdefault(buffer, _Accesses())
            # An access under an inner loop may run as several copies once LLVM unrolls it.
            weight = 1 if depth == innermost else 2
            entry.accesses += weight
            entry.stores += weight if store else 0
            entry.opaque = entry.opaque or loop.loop_var in opaque

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.record(store.buffer, store.indices, store=True)
        self.generic_visit(store)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self.record(load.buffer, load.indices, store=False)
        self.generic_visit(load)

    def visit_LetStmt(self, stmt: LetStmt) -> None:
        self.lets[stmt.var] = stmt.value
        self.generic_visit(stmt)

    def visit_Let(self, expr: Let) -> None:
        self.lets[expr.var] = expr.value
        self.generic_visit(expr)

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self.accesses.setdefault(loop, {})  # a loop object shared by two places counts both
        self.loops.append(loop)
        self.visit(loop.body)
        self.loops.pop()


def _children(expr: PrimExpr) -> list[PrimExpr]:
    children: list[PrimExpr] = []
    for name in type(expr).child_fields():
        value = getattr(expr, name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, PrimExpr):
                children.append(item)
    return children


def vectorize_off_by_loop(stmt: Stmt) -> dict[For, bool]:
    """Every loop in ``stmt`` (``stmt`` itself included), True for one that LLVM's loop
    vectorizer must leave alone: it stores into a buffer that its body accesses more than
    once, once at least at an index that depends on the loop variable other than affinely (see
    the module docstring). One pass over ``stmt``: the code generator asks once per loop nest."""
    walker = _Walker()
    walker.visit(stmt)
    return {
        loop: any(entry.stores and entry.opaque and entry.accesses > 1 for entry in buffers.values())
        for loop, buffers in walker.accesses.items()
    }
