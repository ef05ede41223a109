"""Lowering: the ordered list of named passes from scheduled programs to backend-ready ones.

``lower(func_or_mod, target=None, dump=False) -> IRModule`` runs, in order (docs/lowering.md):

    bind_shape_vars            shape variables (n = T.int32()) -> trailing scalar parameters
    lower_init                 T.init -> `if <reduce iterators at their min>: init`
    convert_blocks_to_loops    blocks disappear: bindings substituted, predicates -> if,
                               alloc_buffer -> Allocate, match_buffer views -> source accesses
    compact_allocations        each Allocate moves down to where its uses are, and shrinks
    partition_tails            a loop whose last iterations alone fail an if is cut in two:
                               the first part without the test (imperfect tiles run unguarded)
    plan_allocations           Allocate.storage: "stack" (small, constant) or "heap"
    flatten_buffers            multi-dimensional buffers -> 1-D; attrs["param_shapes"]
    vectorize_loops            vectorized loops -> Ramp / Broadcast vector expressions
    unroll_loops               small unroll loops of constant extent -> replicated bodies
    lower_parallel             parallel loops -> outlined functions and launch calls
    simplify                   every expression simplified

For a CUDA target (``Target.parse("cuda -arch=sm_80")``) the GPU pipeline runs instead::

    lower_cross_thread_reduction  cross_thread_reduction blocks -> warp shuffles (+ shared memory)
    lower_init, convert_blocks_to_loops, compact_allocations, plan_allocations
    flatten_buffers            warp fragments (wmma.*, m16n8k16.*) keep their tile shapes
    unroll_loops               small unroll loops of constant extent -> replicated bodies
    simplify
    split_host_device          thread-bound loop nests -> device kernels + tir.cuda_launch calls
    insert_syncthreads         __syncthreads() around shared-memory hazards in each kernel
    simplify

Outside the pipeline: ``split_prepack(func)`` moves the packing of layout-free (constant)
parameters into a function run once (``PrepackSplit``).

``dump=True`` prints the program after each pass under a ``# after <name>`` header;
``dump=callable`` is called as ``dump(pass_name, program)`` instead. Every pass is also
importable on its own (``from tir.transform import flatten_buffers``) as a pure
``PrimFunc -> PrimFunc`` function; ``lower_parallel`` works on whole modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tir.ir import IRModule, PrimFunc
from tir.target import Target
from tir.transform._common import LoweringError, apply_to_module, as_module
from tir.transform.bind_shape_vars import bind_shape_vars
from tir.transform.compact_allocations import compact_allocations
from tir.transform.convert_blocks import convert_blocks_to_loops
from tir.transform.flatten_buffers import flatten_buffers
from tir.transform.insert_syncthreads import insert_syncthreads
from tir.transform.lower_cross_thread_reduction import lower_cross_thread_reduction
from tir.transform.lower_init import lower_init
from tir.transform.partition_tails import partition_tails
from tir.transform.plan_allocations import plan_allocations
from tir.transform.simplify import simplify
from tir.transform.split_host_device import split_host_device
from tir.transform.split_prepack import LAYOUT_FREE_ATTR, PrepackSplit, split_prepack
from tir.transform.unroll import unroll_loops
from tir.transform.vectorize import vectorize_loops

__all__ = [
    "FRAGMENT_SCOPES",
    "GPU_PASS_NAMES",
    "LAYOUT_FREE_ATTR",
    "LoweringError",
    "PASS_NAMES",
    "PrepackSplit",
    "bind_shape_vars",
    "compact_allocations",
    "convert_blocks_to_loops",
    "flatten_buffers",
    "gpu_passes",
    "insert_syncthreads",
    "lower",
    "lower_init",
    "partition_tails",
    "passes",
    "plan_allocations",
    "simplify",
    "split_host_device",
    "split_prepack",
    "unroll_loops",
    "vectorize_loops",
]

#: The pipeline, in order.
PASS_NAMES = (
    "bind_shape_vars",
    "lower_init",
    "convert_blocks_to_loops",
    "compact_allocations",
    "partition_tails",
    "plan_allocations",
    "flatten_buffers",
    "vectorize_loops",
    "unroll_loops",
    "lower_parallel",
    "simplify",
)

#: The GPU (CUDA) pipeline, in order.
GPU_PASS_NAMES = (
    "lower_cross_thread_reduction",
    "lower_init",
    "convert_blocks_to_loops",
    "compact_allocations",
    "inject_software_pipeline",
    "plan_allocations",
    "flatten_buffers",
    "unroll_loops",
    "simplify",
    "split_host_device",
    "insert_syncthreads",
    "simplify_kernels",
    "plan_dynamic_shared_memory",
)

#: Storage scopes of warp fragments: kept multi-dimensional (tiles) by the GPU pipeline.
FRAGMENT_SCOPES = (
    "wmma.matrix_a",
    "wmma.matrix_b",
    "wmma.accumulator",
    "m16n8k16.matrixA",
    "m16n8k16.matrixB",
    "m16n8k16.matrixC",
)

ModulePass = Callable[[IRModule], IRModule]
Dump = bool | Callable[[str, IRModule], Any]


def _module_pass(func_pass: Callable[..., PrimFunc], **kwargs: Any) -> ModulePass:
    return lambda mod: apply_to_module(func_pass, mod, **kwargs)


def _lower_parallel_pass() -> ModulePass | None:
    """The ``lower_parallel`` module pass, or None while ``tir/transform/lower_parallel.py`` is absent.

    It is imported lazily: the pass belongs to the parallel runtime, which may be built
    separately from the rest of the pipeline.
    """
    try:
        module = importlib.import_module("tir.transform.lower_parallel")
    except ModuleNotFoundError as error:
        if error.name == "tir.transform.lower_parallel":
            return None
        raise
    return module.lower_parallel  # type: ignore[no-any-return]


def passes(target: Target | None = None) -> list[tuple[str, ModulePass]]:
    """The named module passes ``lower`` runs for ``target``, in order."""
    if target is not None and target.is_cuda:
        return gpu_passes(target)
    pipeline: list[tuple[str, ModulePass]] = [
        ("bind_shape_vars", _module_pass(bind_shape_vars)),
        ("lower_init", _module_pass(lower_init)),
        ("convert_blocks_to_loops", _module_pass(convert_blocks_to_loops)),
        # Compacted first: a tail cut out of a parallel loop's body copies that body into an
        # if/else, and an allocation used by both copies could then move no further in (a
        # padded matmul's accumulator stayed a 384 KiB heap buffer per thread instead of a
        # 6 x 64 tile per iteration).
        ("compact_allocations", _module_pass(compact_allocations)),
        ("partition_tails", _module_pass(partition_tails)),
        ("plan_allocations", _module_pass(plan_allocations)),
        ("flatten_buffers", _module_pass(flatten_buffers)),
        ("vectorize_loops", _module_pass(vectorize_loops, target=target)),
        # Replicated here, not left to LLVM's unroller (llvm.loop.unroll.full): LLVM copying
        # them built candidates 10-25% faster, but a 7 x 2 register tile of ResNet-50's 7x7
        # layers then ran 1.5-1.65x slower (its registers shuffled and spilled every iteration
        # of the reduction loop); loops too large to replicate still go to LLVM.
        ("unroll_loops", _module_pass(unroll_loops)),
    ]
    parallel = _lower_parallel_pass()
    if parallel is not None:
        pipeline.append(("lower_parallel", parallel))
    pipeline.append(("simplify", _module_pass(simplify)))
    return pipeline


def gpu_passes(target: Target) -> list[tuple[str, ModulePass]]:
    """The GPU pipeline (``GPU_PASS_NAMES``): kernels split from the host, barriers inserted."""
    return [
        ("lower_cross_thread_reduction", _module_pass(lower_cross_thread_reduction)),
        ("lower_init", _module_pass(lower_init)),
        ("convert_blocks_to_loops", _module_pass(convert_blocks_to_loops)),
        ("compact_allocations", _module_pass(compact_allocations)),
        (
            "inject_software_pipeline",
            _module_pass(
                importlib.import_module("tir.transform.software_pipeline").inject_software_pipeline, target=target
            ),
        ),
        ("plan_allocations", _module_pass(plan_allocations)),
        ("flatten_buffers", _module_pass(flatten_buffers, keep_scopes=FRAGMENT_SCOPES)),
        ("unroll_loops", _module_pass(unroll_loops)),
        ("simplify", _module_pass(simplify)),
        ("split_host_device", split_host_device),
        ("insert_syncthreads", _module_pass(insert_syncthreads)),
        ("simplify_kernels", _module_pass(simplify)),
        (
            "plan_dynamic_shared_memory",
            importlib.import_module("tir.transform.dynamic_shared_memory").plan_dynamic_shared_memory,
        ),
    ]


def lower(func_or_mod: PrimFunc | IRModule, target: str | Target | None = None, dump: Dump = False) -> IRModule:
    """Run the lowering pipeline; the result is an IRModule of block-free, 1-D-buffer functions.

        ``target`` (a ``Target`` or a target string) only gives hints (vector width); the lowered
        program is correct for any target. For a CUDA target (``Target.parse("cuda -arch=sm_80")``) the GPU pipeline runs instead::

        lower_init, convert_blocks_to_loops, compact_allocations, plan_allocations
        flatten_buffers            warp fragments (wmma.*, m16n8k16.*) keep their tile shapes
        unroll_loops
        simplify
        split_host_device          thread-bound loop nests -> device kernels + tir.cuda_launch calls
        insert_syncthreads         __syncthreads() around shared-memory hazards in each kernel
        simplify
        plan_dynamic_shared_memory kernels with over 48 KB of shared memory take it dynamically

    ``dump=True`` prints the program after every pass,
        ``dump=callable`` receives ``(pass_name, module)`` after every pass.
    """
    resolved = Target.parse(target) if isinstance(target, str) else target
    mod = as_module(func_or_mod)
    for name, run in passes(resolved):
        mod = run(mod)
        if callable(dump):
            dump(name, mod)
        elif dump:
            print(f"# after {name}")
            print(mod.script())
    return mod
