"""Whole models: ONNX import, the operator library, fusion, tasks and the compiled model.

    from metasched import model as msm
    graph = msm.from_onnx("m.onnx", input_shapes={"x": (1, 3, 224, 224)})
    compiled = msm.compile(graph, target="llvm", database=None, threads=2)
    outputs = compiled.run({"x": x})            # dict of output name -> numpy array
    compiled.save("out/"); compiled = msm.load("out/")

    # a dim_param kept symbolic: one build, every batch; scheduled for N = 8
    compiled = msm.compile("m.onnx", symbolic={"N": 8})
    compiled.run({"x": x1}); compiled.run({"x": x16})

docs/design.md section 10 is the map: onnx.py (import, folding), graph.py, ops/ (one module per
operator family), fuse.py (groups), compiled.py (tasks, schedules, the runtime plan), symbolic.py
(symbolic dimensions) and symbolic_schedule.py (their schedules).
"""

from __future__ import annotations

from metasched.model.compiled import CompiledModel, CompileReport, compile, load
from metasched.model.graph import Graph, Node, TensorInfo
from metasched.model.onnx import ModelImportError, UnsupportedOperatorError, from_onnx

__all__ = [
    "CompileReport",
    "CompiledModel",
    "Graph",
    "ModelImportError",
    "Node",
    "TensorInfo",
    "UnsupportedOperatorError",
    "compile",
    "extract_tasks",
    "from_onnx",
    "load",
]


def extract_tasks(graph: Graph, target: str = "llvm", layout: str = "auto", winograd: bool = True) -> list:  # type: ignore[type-arg]
    """The model's tasks (``metasched.Task``), one per structurally distinct fused group,
    weight = occurrences, with FLOP counts: what ``compile(graph, target, database=...,
    layout=layout)`` looks up in the database and replays. A graph with symbolic dimensions
    gives the tasks of its representative sizes. ``winograd``: the channels-last 3x3
    convolutions that fit are tasks as Winograd F(2x2, 3x3) (``metasched.model.layout``),
    which ``compile`` uses when it is given a database."""
    from metasched.model.compiled import representative_graph
    from metasched.model.fuse import lower_group, partition
    from metasched.model.layout import for_target
    from metasched.task import Task, workload_hash

    graph = for_target(graph, target, layout, winograd)
    fixed = representative_graph(graph) if graph.symbolic else graph
    tasks: dict[str, Task] = {}
    for group in partition(graph):
        if group.kind != "kernel":
            continue
        func = lower_group(fixed, group)
        key = workload_hash(func)
        if key in tasks:
            tasks[key].weight += 1
        else:
            tasks[key] = Task.from_func(func, target, name=group.name)
    return list(tasks.values())
