"""Which buffer parameters a program may write (the runtimes refuse read-only arrays for them).

``written_params(func_or_mod)`` is the set of names of buffer parameters that some statement
may write: a ``BufferStore`` to the buffer (or to a ``match_buffer`` view of it), a block
declaring a write of it, or its address handed to a call (``call_extern``, an LLVM intrinsic: the
callee may store through it). In a module the names are gathered over every function, so the
outlined body of a parallel loop, which stores into the captured buffer under the same name,
counts for the entry function's parameter. The answer errs on the side of "written".
"""

from __future__ import annotations

from tir.ir import Block, Buffer, BufferLoad, BufferStore, Call, IRModule, PrimFunc, post_order_visit

__all__ = ["written_params"]

#: Calls that take buffer addresses and do not write through them on their own.
_NON_WRITING_CALLS = frozenset({"tir.parallel_launch"})


def _written_names(func: PrimFunc) -> set[str]:
    names: set[str] = set()
    views: dict[str, str] = {}  # match_buffer name -> the name of the buffer it views

    def visit(node: object) -> None:
        if isinstance(node, BufferStore):
            names.add(node.buffer.name)
        elif isinstance(node, Block):
            names.update(region.buffer.name for region in node.writes)
            for match in node.match_buffers:
                views[match.buffer.name] = match.source.buffer.name
        elif isinstance(node, Call) and node.op not in _NON_WRITING_CALLS and node.op != "if_then_else":
            for arg in node.args:
                if isinstance(arg, Call) and arg.op == "tir.address_of":
                    names.update(load.buffer.name for load in arg.args if isinstance(load, BufferLoad))

    post_order_visit(func.body, visit)
    # A store through a view writes the viewed buffer (views of views included).
    for _ in range(len(views)):
        more = {views[name] for name in names if name in views} - names
        if not more:
            break
        names |= more
    return names


def written_params(func_or_mod: PrimFunc | IRModule) -> frozenset[str]:
    """Names of the buffer parameters ``func_or_mod`` may write (see the module docstring)."""
    funcs = [func_or_mod] if isinstance(func_or_mod, PrimFunc) else list(func_or_mod.functions.values())
    names: set[str] = set()
    for func in funcs:
        names |= _written_names(func)
    params = {param.name for func in funcs for param in func.params if isinstance(param, Buffer)}
    return frozenset(names & params)
