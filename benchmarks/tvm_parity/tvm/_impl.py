"""The shim's mappings: TVM names -> our ``tir`` objects, the ``Schedule`` wrapper, and the comparison.

How a TVM test's ``assert_structural_equal(ours, tvm_expected)`` is judged (``numeric_compare``):
our ``tir.structural_equal`` first (equal => pass); otherwise both functions run in ``tir.interpret``
on the same random inputs (floats U(-1, 1); ints in [-8, 8), retried in [0, 2) when both programs
index out of bounds, as index buffers do) and every parameter buffer is compared (rtol = atol = 1e-4,
1e-2 for float16). A difference raises ``WrongResult`` ("wrong"); both programs failing, or more
than ``PARITY_MAX_ELEMS`` (default 20M) parameter elements, raises ``Uncomparable``; TVM's expected
program failing alone is a shim gap ("no-counterpart").

Name mappings done by the ``Schedule`` wrapper: ``get_sblock`` -> ``get_block``; ``debug_mask="all"``
-> ``debug=True`` (``PARITY_NODEBUG=1`` turns it off); ``sch.mod["main"]`` -> the scheduled function;
``work_on("main")`` / ``get_sblock(..., func_name="main")`` on a lone function are ignored (TVM names
it "main"); ``cache_read`` / ``cache_write`` given a buffer name or object -> its region index.
``tvm.compile`` / ``tvm.build`` return a callable that runs our interpreter.

What it patches at run time, inside the pytest subprocess only (nothing on disk changes):

- ``tir.script.prim_func`` and ``tir.script.ir.ir_module`` are replaced by tolerant wrappers: a
  function our parser cannot read becomes a ``Missing("parse: ...")`` placeholder, so only the test
  cases that use it fail (as "no-counterpart") instead of the whole file failing to collect;
- ``IntImm.__int__`` and ``PrimFunc.with_attr`` (a no-op returning the function) are added when
  our classes lack them;
- ``sys.modules`` gets aliases: ``tvm.script.tir`` / ``tvm.script.tirx`` -> ``tir.script``,
  ``tvm.script.ir`` -> ``tir.script.ir``.

The pytest plugin (``parity_plugin.py``) additionally replaces ``pytest.raises``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest

import tir
import tir.script as _T
import tir.script.ir as _I
import tir.script.parser as _parser
from tir.ir import expr as _expr
from tir.schedule import BlockRV, ExprRV, Instruction, LoopRV, Trace
from tir.schedule.index_map import IndexMap as _IndexMap

from . import Missing, NoCounterpart, _module

tvm = sys.modules["tvm"]


class WrongResult(AssertionError):
    """Our scheduled program computes different numbers than TVM's expected program."""


class Uncomparable(Exception):
    """Both programs fail in our interpreter (e.g. TVM's test program itself reads out of bounds)."""


class TVMError(Exception):
    """Stands for ``tvm.TVMError`` / ``tvm.error.*`` in the tests' ``pytest.raises``."""


SCHEDULES: list[tuple[Any, Any]] = []  # (original function, Schedule) created during the current test
NOTES: list[str] = []  # per-test notes (trace replay failures, comparison details); read by the plugin
MAX_ELEMS = int(os.environ.get("PARITY_MAX_ELEMS", 20_000_000))


def note(msg: str) -> None:
    """Attach a note to the current test case's record."""
    NOTES.append(msg)


# ------------------------------------------------------------------ numeric comparison


def _as_func(x):
    if isinstance(x, Missing):
        raise NoCounterpart(x._path)
    if isinstance(x, ModWrap):
        x = x._func
    if isinstance(x, tir.IRModule):
        fns = x.functions
        if len(fns) == 1:
            return next(iter(fns.values()))
        if "main" in fns:
            return fns["main"]
        raise NoCounterpart(f"comparing a module with functions {list(fns)}")
    if isinstance(x, tir.PrimFunc):
        return x
    return None


def _const(e, env):
    if isinstance(e, int):
        return e
    if isinstance(e, _expr.IntImm):
        return int(e.value)
    if isinstance(e, _expr.Var):
        return env.setdefault(e.name, 16)
    ops = {
        "Add": lambda x, y: x + y,
        "Sub": lambda x, y: x - y,
        "Mul": lambda x, y: x * y,
        "FloorDiv": lambda x, y: x // y,
        "FloorMod": lambda x, y: x % y,
        "Min": min,
        "Max": max,
    }
    if type(e).__name__ in ops:
        return ops[type(e).__name__](_const(e.a, env), _const(e.b, env))
    if type(e).__name__ == "Cast":
        return _const(e.value, env)
    raise NoCounterpart(f"symbolic shape expression {e} in comparison")


def _rand(shape, dtype, rng, int_range, float_ties=False):
    dt = str(dtype)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt.startswith("float"):
        if float_ties:  # few distinct values: ties that order-keeping reductions resolve by position
            return rng.integers(-4, 4, shape).astype(dt)
        return rng.uniform(-1.0, 1.0, shape).astype(dt)
    if dt == "bfloat16":
        raise NoCounterpart("bfloat16 buffer in comparison")
    if dt.startswith("int") or dt.startswith("uint"):
        lo, hi = int_range
        if dt.startswith("uint"):
            lo = max(lo, 0)
        return rng.integers(lo, hi, shape).astype(dt)
    raise NoCounterpart(f"dtype {dt} in comparison")


def _sig(f):
    out = []
    for p in f.params:
        if isinstance(p, tir.Buffer):
            out.append(("buf", tuple(str(s) for s in p.shape), str(p.dtype)))
        else:
            out.append(("var", str(p.dtype)))
    return out


def _args(f, seed, int_range, float_ties=False, spread_scalars=False):
    rng = np.random.default_rng(seed)
    env = {}
    args = []
    float_scalars = 0
    for p in f.params:
        if isinstance(p, tir.Buffer):
            shape = tuple(_const(s, env) for s in p.shape)
            args.append(_rand(shape, p.dtype, rng, int_range, float_ties))
        else:
            dt = str(p.dtype)
            if dt.startswith("int") or dt.startswith("uint"):
                args.append(env.setdefault(p.name, 16))
            elif dt.startswith("float"):
                # spread: -1.0, 0.5, 2.0, ... (a lower bound below an upper one; not all equal)
                args.append(-1.0 + 1.5 * float_scalars if spread_scalars else 0.5)
                float_scalars += 1
            else:
                raise NoCounterpart(f"scalar param of dtype {dt} in comparison")
    return args


def _run(f, args):
    a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    tir.interpret(f, *a)
    return a


def numeric_compare(actual, expected, what="assert_structural_equal", float_ties=False, spread_scalars=False):
    fa, fb = _as_func(actual), _as_func(expected)
    if fa is None or fb is None:
        # not functions (expressions, buffers...): fall back to our structural equality
        tir.assert_structural_equal(actual, expected)
        return
    try:
        if tir.structural_equal(fa, fb):
            note("numeric-compared")  # structurally equal (modulo renaming) => same numbers
            note("structurally-equal")
            return
    except Exception:  # noqa
        pass
    sa, sb = _sig(fa), _sig(fb)
    if (
        [s[0] for s in sa] != [s[0] for s in sb]
        or [s[-1] for s in sa] != [s[-1] for s in sb]
        or [s[1] for s in sa if s[0] == "buf"] != [s[1] for s in sb if s[0] == "buf"]
    ):
        raise WrongResult(f"signature differs: ours {sa} vs TVM expected {sb}")
    for int_range in ((-8, 8), (0, 2)):
        args = _args(fb, 0, int_range, float_ties, spread_scalars)
        total = sum(x.size for x in args if isinstance(x, np.ndarray))
        if total > MAX_ELEMS:
            raise Uncomparable(
                f"parameters too large for the interpreter in this sweep ({total} elements > {MAX_ELEMS})"
            )
        err_a = err_b = None
        try:
            ra = _run(fa, args)
        except Exception as e:  # noqa
            err_a = e
        try:
            rb = _run(fb, args)
        except Exception as e:  # noqa
            err_b = e
        if err_a is not None and err_b is not None:
            if isinstance(err_a, IndexError) and isinstance(err_b, IndexError) and int_range[0] < 0:
                continue  # index-valued input buffers: retry with small non-negative ints
            raise Uncomparable(
                f"interpreter fails on both: ours {type(err_a).__name__}: {str(err_a).splitlines()[0] if str(err_a) else ''} | "
                f"TVM's {type(err_b).__name__}: {str(err_b).splitlines()[0] if str(err_b) else ''}"
            )
        if err_b is not None:
            raise NoCounterpart(
                f"interpreter fails on TVM's expected program only: {type(err_b).__name__}: {str(err_b).splitlines()[0] if str(err_b) else ''}"
            )
        if err_a is not None:
            raise WrongResult(
                f"interpreter fails on our result only: {type(err_a).__name__}: {str(err_a).splitlines()[0] if str(err_a) else ''}"
            )
        for p, x, y in zip(fa.params, ra, rb):
            if not isinstance(x, np.ndarray):
                continue
            dt = str(x.dtype)
            if dt.startswith("float"):
                tol = 1e-2 if dt == "float16" else 1e-4
                ok = np.allclose(x.astype("float64"), y.astype("float64"), rtol=tol, atol=tol, equal_nan=True)
            else:
                ok = np.array_equal(x, y)
            if not ok:
                bad = (
                    np.argwhere(
                        ~np.isclose(x.astype("float64"), y.astype("float64"), rtol=1e-4, atol=1e-4, equal_nan=True)
                    )
                    if dt.startswith("float")
                    else np.argwhere(x != y)
                )
                i = tuple(bad[0]) if len(bad) else ()
                raise WrongResult(
                    f"buffer {p.name!r}: {len(bad)}/{x.size} elements differ; first at {i}: ours {x[i] if i else ''} vs TVM {y[i] if i else ''}"
                )
        note("numeric-compared")
        return
    raise AssertionError("unreachable")


def expected_differs(original, expected):
    """Why TVM's ``expected`` program computes other numbers than the ``original`` it was scheduled
    from (random float inputs, then float inputs of few distinct values, which make ties; float
    scalar parameters -1.0, 0.5, 2.0, ... in order), or None
    when no difference shows (or the interpreter cannot judge)."""
    saved = list(NOTES)
    try:
        return _expected_differs(original, expected)
    finally:
        NOTES[:] = saved


def _expected_differs(original, expected):
    for float_ties in (False, True):
        try:
            numeric_compare(expected, original, float_ties=float_ties, spread_scalars=True)
        except WrongResult as e:
            if not str(e).startswith("buffer "):
                return None  # a signature that differs says nothing about the numbers
            inputs = "float inputs of few distinct values" if float_ties else "random inputs"
            return f"on {inputs}: {str(e).splitlines()[0]}".replace("ours", "TVM's expected").replace(
                "vs TVM", "vs the input program"
            )
        except Exception:  # noqa: BLE001 (uncomparable, missing parse: no evidence either way)
            return None
    return None


def assert_structural_equal(lhs, rhs, map_free_vars=False):
    numeric_compare(lhs, rhs)


def structural_equal(lhs, rhs, map_free_vars=False):
    try:
        numeric_compare(lhs, rhs)
        return True
    except WrongResult:
        return False


# ------------------------------------------------------------------ module wrapper


class ModWrap:
    """TVM's `sch.mod`: an IRModule whose "main" is the scheduled function."""

    def __init__(self, func):
        self._func = func

    def __getitem__(self, name):
        return self._func

    def __contains__(self, name):
        return True

    def script(self, *a, **k):
        return self._func.script()

    def show(self, *a, **k):
        print(self._func.script())

    def __str__(self):
        return self._func.script()

    def get_global_vars(self):
        return [Missing("GlobalVar")]

    @property
    def functions(self):
        return {"main": self._func}

    def with_attr(self, *a):
        return self

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NoCounterpart(f"no counterpart: IRModule.{name}")


def _unwrap_mod(mod):
    if isinstance(mod, Missing):
        raise NoCounterpart(mod._path)
    if isinstance(mod, ModWrap):
        return mod._func
    return mod


# ------------------------------------------------------------------ Schedule wrapper

_SAME = {
    "get_loops",
    "get_child_blocks",
    "get_producers",
    "get_consumers",
    "split",
    "fuse",
    "reorder",
    "add_unit_loop",
    "parallel",
    "vectorize",
    "unroll",
    "bind",
    "annotate",
    "unannotate",
    "compute_at",
    "reverse_compute_at",
    "compute_inline",
    "reverse_compute_inline",
    "decompose_reduction",
    "rfactor",
    "set_scope",
    "storage_align",
    "transform_block_layout",
    "pad_einsum",
    "reindex",
    "rolling_buffer",
    "cache_index",
    "decompose_padding",
    "loop_partition",
    "merge",
    "read_at",
    "write_at",
    "reorder_block_iter_var",
    "unsafe_set_dtype",
    "fuse_reduction_epilogue",
    "annotate_buffer_access",
    "sample_perfect_tile",
    "sample_categorical",
    "sample_compute_location",
    "set_axis_separator",
    "work_on",
    "reindex_cache_read",
    "reindex_cache_write",
}


def _map_index_map(m):
    if isinstance(m, IndexMapShim):
        return m._m
    return m


class Schedule:
    def __init__(self, mod, *, seed=None, debug_mask="none", error_render_level="detail", enable_check=True):
        mod = _unwrap_mod(mod)
        func_name = None
        if isinstance(mod, tir.IRModule) and len(mod.functions) > 1 and "main" in mod.functions:
            func_name = "main"
        dbg = debug_mask == "all" or (isinstance(debug_mask, int) and debug_mask != 0)
        if os.environ.get("PARITY_NODEBUG"):
            dbg = False
        self._s = tir.Schedule(mod, seed=seed, debug=dbg, func_name=func_name)
        SCHEDULES.append((self._s.func, self))

    # --- names that differ
    def get_sblock(self, name, func_name=None):
        if func_name and func_name not in self._s.mod.functions and func_name == "main":
            func_name = None  # TVM names a lone PrimFunc "main"
        return self._s.get_block(name, func_name) if func_name else self._s.get_block(name)

    get_block = get_sblock

    @property
    def mod(self):
        return ModWrap(self._s.func)

    @property
    def trace(self):
        return self._s.trace

    def copy(self):
        n = object.__new__(Schedule)
        n._s = self._s.copy()
        return n

    def show(self, *a, **k):
        self._s.show()

    def get(self, rv):
        return self._s.get(rv)

    def _buf_index(self, block, idx, kind):
        if isinstance(idx, int):
            return idx
        node = self._s.get_block_node(block)
        regions = node.reads if kind == "read" else node.writes
        for i, r in enumerate(regions):
            if (isinstance(idx, str) and r.buffer.name == idx) or r.buffer is idx:
                return i
        raise NoCounterpart(f"cache_{kind} with buffer {idx!r} not found among block {kind}s (shim)")

    def cache_read(self, block, read_buffer_index, storage_scope, consumer_blocks=None):
        return self._s.cache_read(
            block, self._buf_index(block, read_buffer_index, "read"), storage_scope, consumer_blocks
        )

    def cache_write(self, block, write_buffer_index, storage_scope, consumer_blocks=None):
        return self._s.cache_write(
            block, self._buf_index(block, write_buffer_index, "write"), storage_scope, consumer_blocks
        )

    def reindex(self, block, buffer):
        if isinstance(buffer, (tuple, list)) and len(buffer) == 2 and buffer[0] == "read":
            # TVM's read list of a block with an init leaves out what the block writes (its
            # accumulator); ours lists every buffer the block reads, the accumulator included.
            node = self._s.get_block_node(block)
            if node.init is not None:
                written = {id(r.buffer) for r in node.writes}
                reads = [k for k, r in enumerate(node.reads) if id(r.buffer) not in written]
                if len(reads) < len(node.reads) and 0 <= buffer[1] < len(reads):
                    buffer = ("read", reads[buffer[1]])
        return self._s.reindex(block, buffer)

    def cache_inplace(self, *a, **k):
        raise NoCounterpart("no counterpart: Schedule.cache_inplace")

    def transform_layout(self, block, buffer, index_map, pad_value=None, *, assume_injective_transform=False):
        if isinstance(pad_value, IndexMapShim):
            pad_value = pad_value._m
        return self._s.transform_layout(block, buffer, _map_index_map(index_map), pad_value)

    def transform_block_layout(self, block, index_map):
        return self._s.transform_block_layout(block, _map_index_map(index_map))

    def blockize(self, target, preserve_unit_iters=True):
        if isinstance(target, (list, tuple)):
            raise NoCounterpart("no counterpart: Schedule.blockize(list of blocks)")
        return self._s.blockize(target)

    def tensorize(self, block_or_loop, tensor_intrin, preserve_unit_iters=True):
        if tensor_intrin in BROKEN_INTRINS:
            raise NoCounterpart(BROKEN_INTRINS[tensor_intrin])
        return self._s.tensorize(block_or_loop, tensor_intrin)

    def compute_at(self, block, loop, preserve_unit_loops=False, index=-1):
        return self._s.compute_at(block, loop, preserve_unit_loops, index)

    def reverse_compute_at(self, block, loop, preserve_unit_loops=False, index=-1):
        return self._s.reverse_compute_at(block, loop, preserve_unit_loops, index)

    def work_on(self, func_name):
        fns = self._s.mod.functions
        if func_name == "main" and "main" not in fns and len(fns) == 1:
            return None  # TVM names a lone PrimFunc's module entry "main"
        return self._s.work_on(func_name)

    def enter_postproc(self):
        pass

    def __getattr__(self, name):
        if name.startswith("__") or name == "_s":
            raise AttributeError(name)
        if name in _SAME or hasattr(self._s, name):
            return getattr(self._s, name)
        raise NoCounterpart(f"no counterpart: Schedule.{name}")


class IndexMapShim:
    AXIS_SEPARATOR = _IndexMap.AXIS_SEPARATOR

    def __init__(self, m):
        self._m = m

    @staticmethod
    def from_func(func, ndim=None, index_dtype="int32", *, inverse_index_map=None):
        return IndexMapShim(_IndexMap.from_func(func, ndim=ndim, dtypes=index_dtype))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._m, name)


def _index_map_from_func(func, ndim=None, index_dtype="int32", **k):
    return _IndexMap.from_func(func, ndim=ndim, dtypes=index_dtype)


# ------------------------------------------------------------------ testing


def verify_trace_roundtrip(sch, mod, *, debug_mask="all", text_format=("python", "json")):
    inner = sch._s if isinstance(sch, Schedule) else sch
    try:
        fresh = tir.Schedule(
            _unwrap_mod(mod)
            if not isinstance(_unwrap_mod(mod), tir.IRModule) or len(_unwrap_mod(mod).functions) == 1
            else _unwrap_mod(mod),
            func_name=None,
        )
        inner.trace.apply_to(fresh)
        if not tir.structural_equal(fresh.func, inner.func):
            note("trace-roundtrip: replay gives a structurally different program")
        txt = inner.trace.to_json()
        fresh2 = tir.Schedule(_unwrap_mod(mod))
        Trace.from_json(txt).apply_to(fresh2)
    except Exception as e:  # noqa
        note(f"trace-roundtrip failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return sch


def assert_structural_equal_ignore_global_symbol(func1, func2, *args, **kwargs):
    numeric_compare(func1, func2)


def parameter(*values, ids=None, by_dict=None):
    if by_dict is not None:
        ids = list(by_dict.keys())
        values = list(by_dict.values())

    def as_fixture(request):
        return request.param

    return pytest.fixture(params=list(values), ids=ids)(as_fixture)


def parameters(*value_sets, ids=None):
    n = len(value_sets[0])
    outs = []
    for k in range(n):

        def f(request, k=k):
            return request.param[k]

        outs.append(pytest.fixture(params=list(value_sets), ids=ids)(f))
    return outs  # NOTE: not correlated across fixtures (shim limitation)


def _identity_deco(*a, **k):
    if len(a) == 1 and callable(a[0]) and not k:
        return a[0]
    return lambda f: f


def assert_allclose(a, b, rtol=1e-7, atol=1e-7):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


class _Env:
    def __getattr__(self, name):
        if name.startswith("has_"):
            return lambda *a, **k: False  # no CUDA/ROCm here: those tests skip, as they would in TVM
        raise NoCounterpart(f"no counterpart: tvm.testing.env.{name}")


def _main():
    pass


# ------------------------------------------------------------------ wire it up

# Today's TVM spells an expression's dtype ``expr.ty.dtype`` (a type annotation object); index
# maps in its tests use it. Ours carries ``dtype`` directly.
if not hasattr(tir.ir.PrimExpr, "ty"):
    tir.ir.PrimExpr.ty = property(lambda self: type("PrimType", (), {"dtype": self.dtype})())  # type: ignore[attr-defined]


script_mod = _module("tvm.script", tir=_T, tirx=_T, ir=_I)
sys.modules["tvm.script.tir"] = _T
sys.modules["tvm.script.tirx"] = _T
sys.modules["tvm.script.ir"] = _I
sys.modules["tvm.script.ir_builder"] = None  # force ImportError rather than silently stubbing

sched_common = dict(
    Schedule=Schedule,
    ScheduleError=tir.ScheduleError,
    SBlockRV=BlockRV,
    BlockRV=BlockRV,
    LoopRV=LoopRV,
    ExprRV=ExprRV,
    Trace=Trace,
    Instruction=Instruction,
)
for base in ("tvm.s_tir", "tvm.tir", "tvm.tirx"):
    _module(base, **sched_common)
    _module(base + ".schedule", **sched_common)
    _module(base + ".schedule.schedule", **sched_common)
    _module(
        base + ".schedule.testing",
        verify_trace_roundtrip=verify_trace_roundtrip,
        assert_structural_equal_ignore_global_symbol=assert_structural_equal_ignore_global_symbol,
    )

for base in ("tvm.tir", "tvm.tirx"):
    _module(
        base,
        PrimFunc=tir.PrimFunc,
        IndexMap=IndexMapShim,
        Buffer=tir.Buffer,
        Var=tir.Var,
        IntImm=_expr.IntImm,
        For=tir.For,
        Block=tir.Block,
        SBlock=tir.Block,
        BlockRealize=tir.BlockRealize,
        ForKind=tir.ForKind,
        TensorIntrin=tir.TensorIntrin,
        IRModule=tir.IRModule,
    )
    _module(base + ".function", TensorIntrin=tir.TensorIntrin, IndexMap=IndexMapShim, PrimFunc=tir.PrimFunc)
    _module(base + ".expr", IntImm=_expr.IntImm, Var=tir.Var)

_module(
    "tvm.ir", IRModule=tir.IRModule, assert_structural_equal=assert_structural_equal, structural_equal=structural_equal
)
_module(
    "tvm.testing",
    parameter=parameter,
    parameters=parameters,
    fixture=pytest.fixture,
    assert_allclose=assert_allclose,
    main=_main,
    env=_Env(),
    requires_cuda=_identity_deco,
    requires_gpu=_identity_deco,
    requires_llvm=_identity_deco,
    requires_rocm=_identity_deco,
    requires_hexagon=_identity_deco,
    requires_cuda_compute_version=_identity_deco,
    requires_package=_identity_deco,
    skip_if_32bit=_identity_deco,
    uses_gpu=_identity_deco,
    assert_structural_equal_ignore_global_symbol=assert_structural_equal_ignore_global_symbol,
    verify_trace_roundtrip=verify_trace_roundtrip,
)
_module("tvm.error", TVMError=TVMError, InternalError=TVMError, DiagnosticError=TVMError)
tvm.IRModule = tir.IRModule
tvm.TVMError = TVMError
tvm.script = script_mod


# ------------------------------------------------------------------ runtime: tvm.compile -> our interpreter
class NDWrap:
    def __init__(self, arr):
        self._a = np.ascontiguousarray(arr)

    def numpy(self):
        return self._a

    @property
    def shape(self):
        return self._a.shape


def _tensor(arr, device=None):
    return NDWrap(np.asarray(arr))


def _compile(f, target=None, **kw):
    func = _as_func(f)

    def run(*args):
        tir.interpret(func, *[a._a if isinstance(a, NDWrap) else a for a in args])

    return run


_module("tvm.runtime", tensor=_tensor)
_module("tvm.nd", array=_tensor)
tvm.compile = _compile
tvm.build = _compile
tvm.cpu = lambda *a: None
if not hasattr(_expr.IntImm, "__int__"):
    _expr.IntImm.__int__ = lambda self: int(self.value)  # shim-only monkeypatch (runtime, not on disk)


# ------------------------------------------------------------------ tolerant @T.prim_func (runtime patch, shim only)
# A module-level function our parser cannot read would otherwise abort the collection of the whole
# file; instead it becomes a Missing("parse: ...") placeholder that fails only the tests using it.

_orig_script = _parser.script


def _parse_in_caller(func, caller):
    # Our parser resolves a function's free names (closure values, module constants) through the frame
    # that calls it, so the call is made from a frame with the test's own globals and locals.
    loc = dict(caller.f_locals)
    loc["__parity_script"] = _orig_script
    loc["__parity_f"] = func
    g = dict(caller.f_globals)
    try:
        exec("__parity_r = __parity_script(__parity_f)", g, loc)
        return loc["__parity_r"]
    except Exception as e:  # noqa
        s = str(e).strip().splitlines()
        # ScriptError: first line is 'file:line:col: error: msg'; keep the message and the caret context short
        msg = s[0] if s else type(e).__name__
        if "error:" in msg:
            msg = msg.split("error:", 1)[1].strip()
        src = s[1].strip() if len(s) > 1 else ""
        return Missing(f"parse: {type(e).__name__}: {msg} || {src[:120]}")


def _prim_func(func=None, **opts):
    if func is None:

        def deco(f):
            return _parse_in_caller(f, sys._getframe(1))

        return deco
    return _parse_in_caller(func, sys._getframe(1))


_T.prim_func = _prim_func
_orig_ir_module = _I.ir_module


def _ir_module(cls=None, **opts):
    if cls is None:
        return _ir_module
    bad = [v for v in vars(cls).values() if isinstance(v, Missing)]
    if bad:
        return bad[0]
    return _orig_ir_module(cls)


_I.ir_module = _ir_module
script_mod.ir_module = _ir_module
if not hasattr(tir.PrimFunc, "with_attr"):
    tir.PrimFunc.with_attr = lambda self, *a, **k: self  # shim-only: attrs like global_symbol are irrelevant here


def check_accepted_against_original():
    """For a negative test we accepted: is each schedule's result numerically equal to its input?"""
    out = []
    for orig, sch in SCHEDULES:
        if sch._s.func is orig:
            continue
        try:
            numeric_compare(sch._s.func, orig)
            out.append("accepted result numerically equals the original program")
        except WrongResult as e:
            out.append(f"ACCEPTED RESULT DIFFERS FROM ORIGINAL: {e}")
        except Exception as e:  # noqa
            out.append(f"could not compare accepted result with original: {type(e).__name__}: {str(e)[:150]}")
    NOTES.extend(out)


class _IntImmMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _expr.IntImm)

    def __call__(cls, dtype, value, span=None):
        return _expr.IntImm(int(value), str(dtype))  # TVM's argument order is (dtype, value)


class IntImmShim(metaclass=_IntImmMeta):
    pass


for _b in ("tvm.tir", "tvm.tirx"):
    _module(_b, IntImm=IntImmShim)
    _module(_b + ".expr", IntImm=IntImmShim)


BROKEN_INTRINS = {}


class TensorIntrinShim:
    @staticmethod
    def register(name, desc, impl, override=False):
        try:
            if isinstance(desc, Missing) or isinstance(impl, Missing):
                raise NoCounterpart((desc if isinstance(desc, Missing) else impl)._path)
            return tir.TensorIntrin.register(name, desc, impl, override=True)
        except Exception as e:  # noqa
            BROKEN_INTRINS[name] = (
                f"tensor intrin {name!r} not registered: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            )

    @staticmethod
    def get(name, allow_missing=False):
        if name in BROKEN_INTRINS:
            raise NoCounterpart(BROKEN_INTRINS[name])
        try:
            return tir.TensorIntrin.get(name)
        except Exception:
            if allow_missing:
                return None
            raise


for _b in ("tvm.tir", "tvm.tirx"):
    _module(_b, const=lambda value, dtype="int32": tir.ir.const(value, str(dtype)))

for _b in ("tvm.tir", "tvm.tirx"):
    _module(_b, TensorIntrin=TensorIntrinShim)
    _module(_b + ".function", TensorIntrin=TensorIntrinShim)
