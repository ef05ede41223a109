"""plan_allocations: small constant-size buffers on the stack, large or symbolic ones on the heap."""

from __future__ import annotations

from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import Allocate
from tir.transform import convert_blocks_to_loops, plan_allocations
from tir.transform.plan_allocations import STACK_LIMIT_BYTES, buffer_bytes

PROGRAM = """
@T.prim_func
def f(A: T.Buffer((n,), "float32"), n: T.int32):
    small = T.alloc_buffer((16, 16), "float32")
    big = T.alloc_buffer((256, 128), "float32")
    sym = T.alloc_buffer((n,), "float32")
    shared = T.alloc_buffer((256, 128), "float32", scope="shared")
    for i in range(n):
        with T.block("b"):
            vi = T.spatial_axis(n, i)
            sym[vi] = A[vi]
            small[0, 0] = sym[vi]
            big[0, 0] = small[0, 0]
            shared[0, 0] = big[0, 0]
            A[vi] = shared[0, 0]
"""


def _storage(func: tir.PrimFunc) -> dict[str, str]:
    return {n.buffer.name: n.storage for n in nodes_of(func.body) if isinstance(n, Allocate)}


def _converted() -> tir.PrimFunc:
    # Without compact_allocations, which would shrink these buffers to the one element used.
    return convert_blocks_to_loops(tir.parse(PROGRAM))


def test_storage_by_size_and_scope(golden) -> None:
    planned = plan_allocations(_converted())
    assert _storage(planned) == {"small": "stack", "big": "heap", "sym": "heap", "shared": "stack"}
    golden.check("transform/plan_allocations", planned.script())


def test_limit_is_a_parameter() -> None:
    func = _converted()
    assert _storage(plan_allocations(func, stack_limit=1 << 20))["big"] == "stack"
    assert _storage(plan_allocations(func, stack_limit=16))["small"] == "heap"


def test_buffer_bytes() -> None:
    assert STACK_LIMIT_BYTES == 64 * 1024
    assert buffer_bytes(tir.Buffer("x", (4, 8), "float16")) == 64
    assert buffer_bytes(tir.Buffer("x", (tir.Var("n"),), "float32")) is None


def test_same_results() -> None:
    func, make_args = PROGRAMS["big_and_small"]
    planned = plan_allocations(lower_before(func, "plan_allocations"))
    assert _storage(planned) == {"big": "heap"}
    assert_same_results(func, planned, make_args)
