"""split and fuse keep block bindings in the form the validator accepts (issue 17 C).

Simplifying substituted bindings could take them out of iterator-map form: fusing a
``(5, 7, 2)`` nest and splitting the fused loop by 8 gave ``(o * 8 + i) // 14`` next to
``(o * 4 + i // 2) % 7``, and ``verify`` rejected the accepted result ("o is used by two
bindings"). Each accepted step must now verify, print and parse back, and compute the same.
"""

from __future__ import annotations

import random

import pytest
from schedule_testing import check_numerics, check_replay

import tir
from tir.schedule import Schedule, ScheduleError


def _elementwise(shape: tuple[int, ...]) -> tir.PrimFunc:
    names = "ijk"[: len(shape)]
    iters = ", ".join("v" + c for c in names)
    return tir.parse(f'''
@T.script
def scale(A: T.Buffer({shape}, "float32"), B: T.Buffer({shape}, "float32")):
    for {", ".join(names)} in T.grid({", ".join(map(str, shape))}):
        with T.block("B"):
            {iters} = T.remap("{"S" * len(shape)}", {", ".join(names)})
            B[{iters}] = A[{iters}] * 2.0
''')


def _check_valid(sch: Schedule, original: tir.PrimFunc) -> None:
    assert tir.analysis.verify(sch.func) == [], sch.func.script()
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_numerics(original, sch.func, llvm=False)


@pytest.mark.parametrize(
    "shape,factors",
    [((5, 7, 2), [None, 8]), ((6, 12), [5, None, 4]), ((6, 8, 4), [8, 8, None]), ((5, 4, 4), [None, 4, 5])],
)
def test_split_of_a_fused_loop_keeps_the_bindings_valid(shape: tuple[int, ...], factors: list[int | None]) -> None:
    func = _elementwise(shape)
    sch = Schedule(func)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    sch.split(fused, factors)
    _check_valid(sch, func)
    check_replay(sch, func)
    tir.build(sch.func, "llvm")


def test_fuse_after_split_keeps_the_bindings_valid() -> None:
    func = _elementwise((16, 3))
    sch = Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 5])
    loops = sch.get_loops(sch.get_block("B"))
    sch.fuse(*loops[1:4])
    sch.fuse(*sch.get_loops(sch.get_block("B"))[0:2])
    sch.split(sch.get_loops(sch.get_block("B"))[0], [4, None, 2])
    _check_valid(sch, func)


def test_random_fuse_and_split_sequences_give_valid_programs() -> None:
    rng = random.Random(17)
    for _ in range(60):
        shape = tuple(rng.choice([1, 2, 3, 5, 6, 7, 8, 12]) for _ in range(rng.randint(1, 3)))
        func = _elementwise(shape)
        sch = Schedule(func)
        for _ in range(rng.randint(1, 5)):
            loops = sch.get_loops(sch.get_block("B"))
            try:
                if rng.random() < 0.5 and len(loops) >= 2:
                    start = rng.randint(0, len(loops) - 2)
                    sch.fuse(*loops[start : start + rng.randint(2, min(3, len(loops) - start))])
                else:
                    factors: list[int | None] = [rng.choice([2, 3, 4, 5, 8]) for _ in range(rng.randint(2, 3))]
                    factors[rng.randrange(len(factors))] = None
                    sch.split(rng.choice(loops), factors)
            except ScheduleError:
                continue  # a refusal is fine; an invalid accepted result is not
            _check_valid(sch, func)
