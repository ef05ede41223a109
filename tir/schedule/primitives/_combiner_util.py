"""The update of a reduction block read as a combiner, for ``rfactor``.

``rfactor`` splits one reduction into partial reductions and then folds the partials together,
so it regroups and reorders the elements. That gives the same result only when the block's
update is a combiner ``x <- f(x, y)`` (``x`` the values of the outputs, ``y`` the values folded
in) that is associative and commutative, or, for the order-keeping forms below, when the
regrouping keeps the order. This module takes a reduction block apart and recognizes:

- one output ``C[s] = C[s] op e`` with ``op`` one of ``+`` (init 0), ``*`` (init 1), ``T.max``
  (init the lowest value or -inf), ``T.min`` (init the largest value or inf);
- an index and a value output, ``(I, V)``, updated to the better of ``(I[s], V[s])`` and
  ``(i, v)`` (the init is ``(-1, lowest)`` for argmax, ``(-1, largest)`` for argmin):

  - argmax: ``I[s] = T.select(V[s] > v or V[s] == v and I[s] < i, I[s], i)`` and
    ``V[s] = T.select(V[s] > v, V[s], v)``: the largest value, and of equal values the
    smallest index (what TOPI's argmax writes). It picks the maximum of a total order, so it
    is associative and commutative; argmin is the same with ``<``;
  - argmax keeping the first maximum: ``T.select(V[s] >= v, I[s], i)`` and
    ``T.select(V[s] >= v, V[s], v)``: of equal values the one met first. This is associative
    but not commutative: ties go by the order of the iterations, so rfactor accepts it only
    where it keeps that order; argmin with ``<=`` likewise;
- several outputs each reduced on its own by one of the scalar forms (TVM's pair of sums).

With more than one output the body binds every new value to a let variable before any store,
as TVM writes tuple reductions: ``v0 = ...; v1 = ...; I[s] = v0; V[s] = v1`` (one let per
init store, each stored once, to the buffers the init stores to, all at the same indices, the
outputs of one shape). One output may also take that form (``v = C[s] + e; C[s] = v``).

Float values are assumed not to be NaN: with NaN none of max, min, argmax, argmin is
associative, as in TVM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tir.analysis.reduction import identity_ok
from tir.ir import (
    Add,
    Buffer,
    BufferLoad,
    BufferStore,
    FloatImm,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    PrimExpr,
    SeqStmt,
    Stmt,
    Var,
    free_vars,
    post_order_visit,
)
from tir.ir.expr import EQ, GE, GT, LE, LT, And, Or, Select
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError

Fail = Callable[[str, object], ScheduleError]

_OP_NAMES: dict[type, str] = {Add: "+", Mul: "*", Max: "T.max", Min: "T.min"}


# ===================================================================== the block taken apart


@dataclass(frozen=True)
class ReductionUpdate:
    """A reduction block's init and body, taken apart.

    ``inits`` are the init's stores in order (one per output; their order is the order of the
    outputs everywhere below); ``lets`` the body's let bindings in order (none for the plain
    one-output form); ``stores`` the body's stores in order; ``values[k]`` the new value of
    output ``k`` (the let value it stores, or the stored expression)."""

    inits: tuple[BufferStore, ...]
    lets: tuple[tuple[Var, PrimExpr], ...]
    stores: tuple[BufferStore, ...]
    values: tuple[PrimExpr, ...]

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return tuple(init.buffer for init in self.inits)

    def store_of(self, k: int) -> BufferStore:
        """The body's store to output ``k``."""
        return next(store for store in self.stores if store.buffer is self.inits[k].buffer)

    def rebuild(
        self, buffers: Sequence[Buffer], indices: tuple[PrimExpr, ...], values: Sequence[PrimExpr], suffix: str
    ) -> tuple[Stmt, Stmt]:
        """The init and body of the same form, over ``buffers`` (one per output) at
        ``indices``, storing ``values`` (one per output); let variables get ``suffix``."""
        slot = {id(buffer): k for k, buffer in enumerate(self.outputs)}
        init_stores = [BufferStore(buffers[k], init.value, indices) for k, init in enumerate(self.inits)]
        init: Stmt = init_stores[0] if len(init_stores) == 1 else SeqStmt(tuple(init_stores))
        if not self.lets:
            return init, BufferStore(buffers[0], values[0], indices)
        stored_by = {id(store.value): slot[id(store.buffer)] for store in self.stores}
        new_vars = {id(var): Var(f"{var.name}{suffix}", var.dtype) for var, _ in self.lets}
        stores = []
        for store in self.stores:
            assert isinstance(store.value, Var)
            stores.append(BufferStore(buffers[slot[id(store.buffer)]], new_vars[id(store.value)], indices))
        body: Stmt = stores[0] if len(stores) == 1 else SeqStmt(tuple(stores))
        for var, _ in reversed(self.lets):
            body = LetStmt(new_vars[id(var)], values[stored_by[id(var)]], body)
        return init, body


def take_apart(init: Stmt | None, body: Stmt, fail: Fail) -> ReductionUpdate:
    """``init`` and ``body`` of a reduction block as a ReductionUpdate, or a refusal that says
    which rule of the form (module docstring) the block breaks."""
    if isinstance(init, BufferStore):
        inits: list[BufferStore] = [init]
    elif isinstance(init, SeqStmt) and all(isinstance(s, BufferStore) for s in init.stmts):
        inits = list(init.stmts)  # type: ignore[arg-type]
    else:
        raise fail("the init must be buffer stores, one per output (`C[...] = <identity>`), and nothing else", init)
    seen: set[int] = set()
    for store in inits:
        if id(store.buffer) in seen:
            raise fail(f"the init stores to {store.buffer.name} twice; it must store each output once", init)
        seen.add(id(store.buffer))
    n = len(inits)

    lets: list[tuple[Var, PrimExpr]] = []
    rest = body
    while isinstance(rest, LetStmt):
        lets.append((rest.var, rest.value))
        rest = rest.body
    if not lets:
        if n > 1:
            raise fail(
                f"with {n} outputs the body must bind each new value to a let variable and then store the "
                f"variables (`v0 = ...; v1 = ...; {inits[0].buffer.name}[...] = v0; ...`); it binds none",
                body,
            )
        if not isinstance(body, BufferStore):
            raise fail(f"the body must be one store `{inits[0].buffer.name}[...] = ...`; saw:\n{body}", body)
        if body.buffer is not inits[0].buffer:
            raise fail(
                f"the body stores to {body.buffer.name}, but the init stores to {inits[0].buffer.name}; they must "
                "store the same output",
                body,
            )
        stores = [body]
        values = [body.value]
    else:
        stores = _stores_after_lets(inits, lets, rest, body, fail)
        bound = {id(var): value for var, value in lets}
        values_by_buffer = {id(store.buffer): bound[id(store.value)] for store in stores}
        values = [values_by_buffer[id(init.buffer)] for init in inits]

    # Every output: one shape, and every store (init and body) at the same indices.
    first = inits[0]
    for store in (*inits, *stores):
        if len(store.buffer.shape) != len(first.buffer.shape) or not all(
            structural_equal(a, b) for a, b in zip(store.buffer.shape, first.buffer.shape)
        ):
            raise fail(
                f"the outputs {first.buffer.name} {_shape(first.buffer)} and {store.buffer.name} "
                f"{_shape(store.buffer)} have different shapes; all outputs of a tuple reduction have one",
                body,
            )
        if len(store.indices) != len(first.indices) or not all(
            structural_equal(a, b) for a, b in zip(store.indices, first.indices)
        ):
            raise fail(
                f"{store.buffer.name}[{', '.join(map(str, store.indices))}] and "
                f"{first.buffer.name}[{', '.join(map(str, first.indices))}] are at different indices; the init "
                "and the body must store every output at the same indices",
                store,
            )
    return ReductionUpdate(tuple(inits), tuple(lets), tuple(stores), tuple(values))


def _stores_after_lets(
    inits: list[BufferStore], lets: list[tuple[Var, PrimExpr]], rest: Stmt, body: Stmt, fail: Fail
) -> list[BufferStore]:
    n = len(inits)
    if len(lets) != n:
        raise fail(
            f"the body binds {len(lets)} let variable(s) for {n} init store(s); it must bind one new value per output",
            body,
        )
    let_ids = {id(var) for var, _ in lets}
    if len(let_ids) != len(lets):
        raise fail("the body binds one let variable twice", body)
    for var, value in lets:
        used = sorted(v.name for v in free_vars(value) if id(v) in let_ids)
        if used:
            raise fail(
                f"the value bound to {var.name} uses the let variable(s) {used}; each new value must be computed "
                "from the outputs' old values and the inputs only",
                body,
            )
    if isinstance(rest, BufferStore):
        stores = [rest]
    elif isinstance(rest, SeqStmt) and all(isinstance(s, BufferStore) for s in rest.stmts):
        stores = list(rest.stmts)  # type: ignore[arg-type]
    else:
        odd = (
            next((s for s in rest.stmts if not isinstance(s, BufferStore)), rest) if isinstance(rest, SeqStmt) else rest
        )
        shown = str(odd).splitlines()[0] if str(odd) else type(odd).__name__
        raise fail(f"after its lets the body must be buffer stores only; found `{shown}`", rest)
    if len(stores) != n:
        raise fail(f"the body stores {len(stores)} times for {n} init store(s); it must store each output once", rest)
    stored_vars: set[int] = set()
    stored_buffers: set[int] = set()
    names = [var.name for var, _ in lets]
    for store in stores:
        if not (isinstance(store.value, Var) and id(store.value) in let_ids):
            raise fail(
                f"the body stores {store.value} to {store.buffer.name}; each store must store one of the let "
                f"variables {names}",
                store,
            )
        if id(store.value) in stored_vars:
            raise fail(f"the body stores the let variable {store.value.name} twice; each is stored once", rest)
        stored_vars.add(id(store.value))
        if id(store.buffer) in stored_buffers:
            raise fail(f"the body stores to {store.buffer.name} twice; each output is stored once", rest)
        stored_buffers.add(id(store.buffer))
    init_buffers = {id(init.buffer) for init in inits}
    for store in stores:
        if id(store.buffer) not in init_buffers:
            initialized = [init.buffer.name for init in inits]
            raise fail(
                f"the body stores to {store.buffer.name}, which the init does not store to (it stores to "
                f"{initialized}); the init and the body must store the same outputs",
                store,
            )
    return stores


def _shape(buffer: Buffer) -> str:
    return "(" + ", ".join(str(e) for e in buffer.shape) + ("," if len(buffer.shape) == 1 else "") + ")"


def _reads(expr: PrimExpr, buffers: Sequence[Buffer]) -> list[Buffer]:
    """The buffers of ``buffers`` that ``expr`` loads from, in order of first load."""
    ids = {id(b) for b in buffers}
    found: dict[int, Buffer] = {}
    post_order_visit(
        expr,
        lambda n: (
            found.setdefault(id(n.buffer), n.buffer) if isinstance(n, BufferLoad) and id(n.buffer) in ids else None
        ),
    )
    return list(found.values())


# ===================================================================== combiners


@dataclass(frozen=True)
class Combiner:
    """What a reduction's update does, in a form that can be rebuilt over other operands.

    ``operands[k]`` is what the update folds into output ``k`` (``y``); ``combine(x, y)`` gives
    the new value of every output from the old values ``x`` and the operands ``y``, in the
    form the block wrote it. ``ordered``: ties go by the order of the iterations (associative,
    not commutative), so the elements must be met in the same order after a regrouping."""

    name: str
    operands: tuple[PrimExpr, ...]
    ordered: bool
    build: Callable[[Sequence[PrimExpr], Sequence[PrimExpr]], list[PrimExpr]]

    def combine(self, x: Sequence[PrimExpr], y: Sequence[PrimExpr]) -> list[PrimExpr]:
        return self.build(x, y)


def _scalar_form(output: str) -> str:
    return f"`{output}[...] = {output}[...] op e` with op one of +, *, T.max, T.min"


def _scalar(update: ReductionUpdate, k: int, fail: Fail) -> tuple[str, PrimExpr, Callable[..., PrimExpr]]:
    """Output ``k`` reduced on its own: its op's name, operand, and rebuild function."""
    init, value = update.inits[k], update.values[k]
    output = init.buffer
    prefix = "" if len(update.inits) == 1 else f"output {output.name}: "
    form = _scalar_form(output.name)
    op = type(value)
    if op not in _OP_NAMES:
        raise fail(f"{prefix}the body must be of the form {form}; saw the value {value}", update.store_of(k))
    a, b = value.a, value.b  # type: ignore[attr-defined]

    def own(e: PrimExpr) -> bool:
        return isinstance(e, BufferLoad) and e.buffer is output

    if own(a) and not _reads(b, update.outputs):
        acc_first, operand = True, b
    elif own(b) and not _reads(a, update.outputs):
        acc_first, operand = False, a
    else:
        others = "any output" if len(update.inits) > 1 else output.name
        raise fail(
            f"{prefix}the body must combine {output.name}[...] with a value that does not read {others} ({form}); "
            f"saw the value {value}",
            update.store_of(k),
        )
    ok, expected = identity_ok(op, init.value)
    if not ok:
        raise fail(
            f"{prefix}the init value {init.value} is not the identity of {_OP_NAMES[op]} (expected {expected})", init
        )

    def rebuild(x: PrimExpr, y: PrimExpr) -> PrimExpr:
        return op(x, y) if acc_first else op(y, x)

    return _OP_NAMES[op], operand, rebuild


# The new (index, value) of an argmax/argmin from x = (old index, old value) and y = (index,
# value) folded in.
_ArgBuild = Callable[[PrimExpr, PrimExpr, PrimExpr, PrimExpr], tuple[PrimExpr, PrimExpr]]
# An argmax/argmin form: name, whether it keeps the order, the value's op (for its init), build.
_ArgForm = tuple[str, bool, type, _ArgBuild]


def _tie_break(better: type) -> _ArgBuild:
    def build(x0: PrimExpr, x1: PrimExpr, y0: PrimExpr, y1: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        keep = Or(better(x1, y1), And(EQ(x1, y1), LT(x0, y0)))
        return Select(keep, x0, y0), Select(better(x1, y1), x1, y1)

    return build


def _first(better_or_equal: type) -> _ArgBuild:
    def build(x0: PrimExpr, x1: PrimExpr, y0: PrimExpr, y1: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        keep = better_or_equal(x1, y1)
        return Select(keep, x0, y0), Select(keep, x1, y1)

    return build


_ARG_FORMS: list[_ArgForm] = [
    ("argmax", False, Max, _tie_break(GT)),
    ("argmin", False, Min, _tie_break(LT)),
    ("argmax keeping the first maximum (`>=`)", True, Max, _first(GE)),
    ("argmin keeping the first minimum (`<=`)", True, Min, _first(LE)),
]

_ARG_HELP = (
    "argmax: `I[s] = T.select(V[s] > v or V[s] == v and I[s] < i, I[s], i)`, "
    "`V[s] = T.select(V[s] > v, V[s], v)` with init (-1, the lowest value); argmin likewise with <; "
    "or the order-keeping forms with `V[s] >= v` (`<=`) in both selects"
)


def _arg_combiner(update: ReductionUpdate, fail: Fail) -> Combiner | None:
    """The two outputs as (index, value) of an argmax/argmin form, or None if no form fits."""
    for i, v in ((0, 1), (1, 0)):
        e0, e1 = update.values[i], update.values[v]
        if not (isinstance(e0, Select) and isinstance(e1, Select)):
            continue
        x0 = BufferLoad(update.inits[i].buffer, update.inits[i].indices)
        x1 = BufferLoad(update.inits[v].buffer, update.inits[v].indices)
        y0, y1 = e0.false_value, e1.false_value
        if y0.dtype != x0.dtype or y1.dtype != x1.dtype or _reads(y0, update.outputs) or _reads(y1, update.outputs):
            continue
        for name, ordered, value_op, build in _ARG_FORMS:
            want0, want1 = build(x0, x1, y0, y1)
            if not (structural_equal(want0, e0) and structural_equal(want1, e1)):
                continue
            index_init, value_init = update.inits[i].value, update.inits[v].value
            value_ok, expected = identity_ok(value_op, value_init)
            index_ok = isinstance(index_init, (IntImm, FloatImm)) and index_init.value == -1
            if not (index_ok and value_ok):
                raise fail(
                    f"the init values ({update.inits[i].buffer.name}, {update.inits[v].buffer.name}) = "
                    f"({index_init}, {value_init}) are not the identity of {name} (expected (-1, {expected}))",
                    update.inits[0],
                )

            def combine(
                x: Sequence[PrimExpr], y: Sequence[PrimExpr], i: int = i, v: int = v, build: _ArgBuild = build
            ) -> list[PrimExpr]:
                new_index, new_value = build(x[i], x[v], y[i], y[v])
                out = [new_index, new_value] if i == 0 else [new_value, new_index]
                return out

            operands = (y0, y1) if i == 0 else (y1, y0)
            return Combiner(name, operands, ordered, combine)
    return None


def match_combiner(update: ReductionUpdate, fail: Fail) -> Combiner:
    """The combiner ``update`` is, or a refusal saying what rfactor recognizes."""
    n = len(update.inits)
    if n == 2:
        found = _arg_combiner(update, fail)
        if found is not None:
            return found
    if n > 1:
        for k, value in enumerate(update.values):
            others = [b for b in _reads(value, update.outputs) if b is not update.outputs[k]]
            if others:
                raise fail(
                    f"the new value of {update.outputs[k].name} reads {others[0].name}, and the update is not one of "
                    f"the tuple combiners rfactor knows ({_ARG_HELP}); saw {value}",
                    update.store_of(k),
                )
    parts = [_scalar(update, k, fail) for k in range(n)]

    def combine(x: Sequence[PrimExpr], y: Sequence[PrimExpr]) -> list[PrimExpr]:
        return [rebuild(a, b) for (_, _, rebuild), a, b in zip(parts, x, y)]

    name = parts[0][0] if n == 1 else "(" + ", ".join(p[0] for p in parts) + ")"
    return Combiner(name, tuple(p[1] for p in parts), False, combine)
