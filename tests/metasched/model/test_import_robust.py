"""Import robustness: dynamic input dimensions (-1, unnamed, and 0 as onnxruntime reads it), and
every bad input a user can give (a broken or foreign file, a data-dependent shape, an
unsupported operator or opset, input_shapes that do not fit) is one clear line from from_onnx
and from the command line (exit 2), which then leaves no output or work directory behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from metasched import model as msm  # noqa: E402

RNG = np.random.default_rng(0)
F = TensorProto.FLOAT


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def relu_model(dims: Any, opset: int = 17) -> Any:
    """Relu on an input declared with ``dims`` (None: no shape at all)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "t",
        [helper.make_tensor_value_info("x", F, dims)],
        [helper.make_tensor_value_info("y", F, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def unnamed(dims: list[int | None]) -> Any:
    """A Relu model whose None dimensions have neither a value nor a name."""
    model = relu_model([1 if d is None else d for d in dims])
    for dim, declared in zip(model.graph.input[0].type.tensor_type.shape.dim, dims, strict=True):
        if declared is None:
            dim.Clear()
    return model


def raises(error: type[Exception], pattern: str, *args: Any, **kwargs: Any) -> Exception:
    """``from_onnx(*args, **kwargs)`` raises ``error`` with one line matching ``pattern``."""
    with pytest.raises(error, match=pattern) as info:
        msm.from_onnx(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value


# ---------------------------------------------------------------- dynamic input dimensions


@pytest.mark.parametrize("model", [relu_model([-1, 4]), unnamed([None, 4])], ids=["minus-one", "unnamed"])
def test_dynamic_dimension_without_name_binds(model: Any) -> None:
    written = "-1" if model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value") else "without a size"
    raises(
        msm.ModelImportError,
        rf"input 'x' dimension 0 is dynamic \(written {written}.*input_shapes=\{{'x': \(D0, 4\)\}}",
        model,
    )
    graph = msm.from_onnx(model, input_shapes={"x": (3, 4)})
    assert graph.infos["y"].shape == (3, 4)
    x = r(3, 4)
    np.testing.assert_array_equal(msm.compile(graph, schedule="none").run({"x": x})["y"], ort_run(model, {"x": x})["y"])
    raises(msm.ModelImportError, "dimension 1 is fixed at 4, input_shapes gives 5", model, input_shapes={"x": (3, 5)})
    # symbolic= cannot name it; input_shapes can, and then it stays symbolic.
    raises(msm.ModelImportError, r"'N', which is no dim_param.*takes one in input_shapes", model, symbolic={"N": 2})
    graph = msm.from_onnx(model, input_shapes={"x": ("N", 4)}, symbolic={"N": 2})
    assert str(graph.infos["y"].shape[0]) == "N"


def test_zero_dimension_is_fixed_and_empty() -> None:
    """dim_value 0 is a size, as onnxruntime reads it (it refuses any other), not a wildcard."""
    model = relu_model([0, 4])
    assert msm.from_onnx(model).infos["y"].shape == (0, 4)
    raises(msm.ModelImportError, r"dimension 0 is fixed at 0 \(an empty dimension", model, input_shapes={"x": (1, 4)})


def test_input_without_shape_needs_input_shapes() -> None:
    model = relu_model(None)
    raises(msm.ModelImportError, r"input 'x' declares no shape \(not even its rank\): bind it with", model)
    assert msm.from_onnx(model, input_shapes={"x": (2, 5)}).infos["y"].shape == (2, 5)


@pytest.mark.parametrize(
    ("shapes", "pattern"),
    [
        ({"z": (2, 3)}, r"input_shapes names 'z', which is not an input of the model \(its inputs: 'x'\)"),
        ({"x": (2, 3, 1)}, r"input 'x' has rank 2 but input_shapes gives \(2, 3, 1\)"),
        ({"x": (2, 4)}, "input 'x' dimension 1 is fixed at 3, input_shapes gives 4"),
        ({"x": (2, -3)}, r"input_shapes\['x'\] dimension 1 is -3: give a size"),
        ({"x": (2, 3.5)}, r"input_shapes\['x'\] dimension 1 is 3.5: give a size"),
        ({"x": "2,3"}, r"input_shapes\['x'\] must be a sequence of sizes"),
        ({"x": (2, None)}, "input 'x' dimension 1: input_shapes gives None, which names no symbolic dimension"),
        ({"x": ("N", 3)}, r"input 'x' dimension 0 is fixed at 2, input_shapes gives 'N' \(only a dynamic"),
    ],
)
def test_input_shapes_that_do_not_fit(shapes: dict[str, Any], pattern: str) -> None:
    raises(msm.ModelImportError, pattern, relu_model([2, 3]), input_shapes=shapes)


# ---------------------------------------------------------------- graphs the library cannot compile


def test_data_dependent_shapes_name_the_node() -> None:
    x = r(2, 3)
    nonzero = [
        helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["y"]),
    ]
    raises(
        msm.ModelImportError,
        r"NonZero node 'nz' \(opset 17\).*'x' \(a model input\), a data-dependent shape",
        make_model(nonzero, {"x": x}, ["y"]),
    )
    computed = [
        helper.make_node("Cast", ["i"], ["s"], to=TensorProto.INT64, name="cast"),
        helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape"),
    ]
    raises(
        msm.ModelImportError,
        r"Reshape node 'reshape'.*input 1, 's' \(computed from the model's inputs by Cast "
        r"node 'cast'\), must be a constant known at import",
        make_model(computed, {"x": x, "i": np.array([3, 2], np.float32)}, ["y"]),
    )
    ranged = [helper.make_node("Range", ["zero", "n", "one"], ["y"], name="range")]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64)}
    raises(
        msm.ModelImportError,
        r"Range node 'range'.*'n' \(a model input\) is not a constant.*only at import",
        make_model(ranged, {"n": np.array(4, np.int64)}, ["y"], inits),
    )


def test_unsupported_operators_and_opsets() -> None:
    x = r(2, 3)
    error = raises(
        msm.UnsupportedOperatorError,
        r"unsupported operator 'Frobnicate' \(node 'f', opset 17\)",
        make_model([helper.make_node("Frobnicate", ["x"], ["y"], name="f")], {"x": x}, ["y"]),
    )
    assert error.op_type == "Frobnicate"  # type: ignore[attr-defined]
    custom = relu_model([2, 3])
    custom.graph.node[0].domain, custom.graph.node[0].op_type = "com.example", "Frobnicate"
    custom.opset_import.append(helper.make_opsetid("com.example", 1))
    raises(msm.UnsupportedOperatorError, r"com.example::Frobnicate .*only the default ONNX domain", custom)
    for opset, target in ((5, 13), (22, 21)):
        model = relu_model([2, 3], opset)
        error = raises(
            msm.UnsupportedOperatorError,
            rf"opset {opset}; supported are 6 to 21 .*convert_version\(model, "
            rf"{target}\)",
            model,
        )
        assert error.op_type is None  # type: ignore[attr-defined]


def _files(tmp_path: Path) -> dict[str, Path]:
    """Broken and foreign files next to good ones."""
    good = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], {"x": r(2, 3)}, ["y"], {"unused": r(64, 64)}
    ).SerializeToString()
    files = {
        "truncated": good[: len(good) // 2],
        "text": b"this is not a model\n",
        "png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "empty": b"",
    }
    paths = {}
    for name, data in files.items():
        paths[name] = tmp_path / f"{name}.onnx"
        paths[name].write_bytes(data)
    return paths


def test_broken_and_foreign_files(tmp_path: Path) -> None:
    paths = _files(tmp_path)
    for name in ("truncated", "text", "png"):
        raises(
            msm.ModelImportError,
            rf"cannot read ONNX file '.*{name}.onnx': it is not an ONNX model, or it is "
            "truncated",
            str(paths[name]),
        )
    raises(
        msm.ModelImportError,
        "cannot parse the ONNX bytes: it is not an ONNX model, or it is truncated",
        paths["truncated"].read_bytes(),
    )
    raises(msm.ModelImportError, "the model holds no graph", str(paths["empty"]))
    raises(msm.ModelImportError, "is a directory, not an ONNX file", str(tmp_path))
    raises(msm.ModelImportError, "does not exist", str(tmp_path / "missing.onnx"))


# ---------------------------------------------------------------- the command line


def _cli(capsys: Any, *args: str) -> tuple[int, str]:
    from metasched.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


def test_command_line_errors_are_one_line_and_leave_nothing(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    x = r(2, 3)
    models = {
        "nonzero": make_model(
            [
                helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
                helper.make_node("Shape", ["nz"], ["s"]),
                helper.make_node("Reshape", ["x", "s"], ["y"]),
            ],
            {"x": x},
            ["y"],
        ),
        "opset22": relu_model([2, 3], 22),
        "frobnicate": make_model([helper.make_node("Frobnicate", ["x"], ["y"])], {"x": x}, ["y"]),
        "minus1": relu_model([-1, 3]),
        "relu": relu_model([2, 3]),
    }
    for name, model in models.items():
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
    cases = [
        (["truncated.onnx"], "'truncated.onnx' is not an ONNX model, or it is truncated"),
        (["text.onnx"], "'text.onnx' is not an ONNX model"),
        (["empty.onnx"], "it holds no graph"),
        (["nonzero.onnx"], "NonZero node 'nz' (opset 17): its output's shape depends on the values of 'x'"),
        (["opset22.onnx"], "opset22.onnx: the model uses opset 22; supported are 6 to 21"),
        (["frobnicate.onnx"], "unsupported operator 'Frobnicate' (node '#0', opset 17) (metasched doctor"),
        (["minus1.onnx"], "dimension 0 is dynamic (written -1) and has no name: give the input's shape with --input"),
        (["relu.onnx", "--input", "z:2,3"], "--input names 'z', which is not an input of the model"),
        (["relu.onnx", "--input", "x:2,3,4"], "input 'x' has rank 2 but --input gives (2, 3, 4)"),
        (["relu.onnx", "--input", "x:2,4"], "input 'x' dimension 1 is fixed at 3, --input gives 4"),
    ]
    for k, (args, expected) in enumerate(cases):
        for command in (["compile", *args, "-o", f"out{k}"], ["tune", *args, "--trials", "1", "--work-dir", f"w{k}"]):
            code, err = _cli(capsys, *command)
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and len(lines) == 1, (command, err)
            assert lines[0].startswith(f"metasched {command[0]}: error: ") and expected in lines[0], (command, err)
            if "opset" in args[0]:
                assert "doctor" not in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []  # no out*/ and no w*/
    code, err = _cli(capsys, "compile", "minus1.onnx", "--input", "x:5,3", "-o", "ok")
    assert code == 0, err
    assert (tmp_path / "ok" / "graph.json").exists()


def test_weights_in_a_separate_file(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """External data (models over 2 GB) is read from the model's directory, by from_onnx and by
    the command line; a missing data file is one line."""
    monkeypatch.chdir(tmp_path)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": r(2, 8)}, ["y"], {"w": r(8, 8)})
    onnx.save(model, "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    assert msm.from_onnx("m.onnx").constants["w"].shape == (8, 8)
    code, err = _cli(capsys, "compile", "m.onnx", "-o", "out")
    assert code == 0, err
    (tmp_path / "m.data").unlink()
    raises(msm.ModelImportError, "cannot read ONNX file 'm.onnx'", "m.onnx")
    code, err = _cli(capsys, "compile", "m.onnx", "-o", "out2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "stored in separate files" in err, err
    assert not (tmp_path / "out2").exists()
