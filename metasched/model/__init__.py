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
operator family), fuse.py (groups), compiled.py (tasks, schedules, the compiled model), plan.py
(the runtime plan: where values live, the steps), symbolic.py
(symbolic dimensions) and symbolic_schedule.py (their schedules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metasched.model.compiled import CompiledModel, CompileReport, compile, load
from metasched.model.graph import Graph, Node, TensorInfo
from metasched.model.onnx import ModelImportError, UnsupportedOperatorError, from_onnx
from tir.target import Target

if TYPE_CHECKING:
    from metasched.task import Task

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


def extract_tasks(graph: Graph, target: str | Target = "llvm", layout: str = "auto", winograd: bool = True) -> list[Task]:
    """The model's tasks (``metasched.Task``), one per structurally distinct fused group,
    weight = occurrences, with FLOP counts: what ``compile(graph, target, database=...,
    layout=layout)`` looks up in the database and replays (``compiled.group_tasks`` makes the
    tasks of both: a task is named after its first group, ``g12_conv_relu``, its ``pattern``
    ``conv_relu``). A graph with symbolic dimensions gives the tasks of its representative
    sizes. ``winograd``: the channels-last 3x3 convolutions that fit are tasks as Winograd
    F(2x2, 3x3) (``metasched.model.layout``), which ``compile`` uses when it is given a
    database."""
    from dataclasses import replace

    from metasched.model.compiled import group_tasks
    from metasched.model.fuse import partition
    from metasched.model.layout import for_target

    target = Target.parse(target)
    graph = for_target(graph, target, layout, winograd)
    tasks: dict[str, Task] = {}
    distinct = {task.name: task for task in group_tasks(graph, partition(graph), target).values()}
    for task in distinct.values():
        # Symbolic programs that differ can be one program at the representative sizes: tuned once.
        known = tasks.get(task.key)
        tasks[task.key] = task if known is None else replace(known, weight=known.weight + task.weight)
    return list(tasks.values())
