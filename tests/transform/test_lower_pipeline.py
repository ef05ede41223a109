"""The lowering pipeline: pass order, dumps, and every example and test program lowered and run."""

from __future__ import annotations

import numpy as np
import pytest
from examples_testing import EXAMPLES_DIR, load_example
from lowering_programs import PROGRAMS, assert_lowered, assert_same_results, lower_before, nodes_of

import tir
from tir.target import Target
from tir.transform import PASS_NAMES, lower, passes

EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py") if not p.stem.startswith("_"))


def test_pass_order() -> None:
    names = [name for name, _ in passes()]
    assert names == [name for name in PASS_NAMES if name in names]
    assert set(PASS_NAMES) - set(names) <= {"lower_parallel"}
    assert names[-1] == "simplify"


def test_dump_callable_sees_every_pass() -> None:
    seen: list[str] = []
    mod = lower(PROGRAMS["matmul_init"][0], dump=lambda name, program: seen.append(name))
    assert seen == [name for name, _ in passes()]
    assert isinstance(mod, tir.IRModule)


def test_dump_prints(capsys: pytest.CaptureFixture[str]) -> None:
    lower(PROGRAMS["split_predicate"][0], dump=True)
    out = capsys.readouterr().out
    for name, _ in passes():
        assert f"# after {name}" in out


def test_module_and_target_inputs() -> None:
    func = PROGRAMS["elementwise_vec"][0]
    by_func = lower(func, target="llvm")
    by_module = lower(tir.IRModule({func.name: func}), target=Target.parse("llvm"))
    tir.assert_structural_equal(by_func, by_module)
    assert list(by_func.functions) == [func.name]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_lowered_match_reference(name: str) -> None:
    example = load_example(name)
    target = Target.parse(getattr(example, "TARGET", "llvm"))
    mod = lower(example.KERNEL, target=target)
    if target.is_cuda:
        # Host function + device kernels: the interpreter runs single-function programs only.
        assert len(mod.functions) > 1 and not any(
            isinstance(node, (tir.Block, tir.BlockRealize)) for f in mod.functions.values() for node in nodes_of(f.body)
        )
        pytest.skip(f"{name} is lowered for {target.text}: the interpreter does not run host + kernel modules")
    assert_lowered(mod, example.KERNEL.name)
    args = example.make_args(np.random.default_rng(0))
    expected = example.reference(*[a.copy() for a in args])
    tir.interpret(mod, *args)
    by_name = {b.name: a for b, a in zip(example.KERNEL.buffer_params, args)}
    for out_name, want in expected.items():
        np.testing.assert_allclose(by_name[out_name], want, rtol=0, atol=example.ATOL, err_msg=f"{name}: {out_name}")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_lowered_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    mod = lower(func)
    assert_lowered(mod, func.name)
    assert func.name in mod.functions  # the entry keeps its name (parallel loops may be outlined)
    assert_same_results(func, mod, make_args)  # parallel launches run their iterations in order
    assert_same_results(func, lower_before(func), make_args)


def test_lowered_golden(golden) -> None:
    golden.check("transform/lower_matmul_relu", lower(load_example("matmul_relu").KERNEL).script())
