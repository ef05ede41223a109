"""Blocks of the script dialect: ``with T.block(...)``, iterators (``T.spatial_axis``,
``T.remap`` ...), the block header (``T.reads``, ``T.writes``, ``T.where``, ``T.block_attr``,
``T.match_buffer``) and ``with T.init()``. Omitted reads/writes are inferred with
``tir.analysis.block_access``.
"""

from __future__ import annotations

import ast
from typing import Any

from tir.ir.buffer import BufferRegion, IterVar, MatchBufferRegion, Range
from tir.ir.dtype import DataType, as_dtype
from tir.ir.expr import IterKind, PrimExpr, Var
from tir.ir.node import Span
from tir.ir.stmt import Block, BlockRealize
from tir.script.diagnostics import Source, script_error
from tir.script.parse_stmt import BUFFER_PARAMS, BlockFrame, StmtParser, true_const
from tir.script.rules import describe, zero

_AXIS_KINDS = {"spatial_axis": IterKind.SPATIAL, "reduce_axis": IterKind.REDUCE, "opaque_axis": IterKind.OPAQUE}
_REMAP_KINDS = {"S": IterKind.SPATIAL, "R": IterKind.REDUCE, "O": IterKind.OPAQUE}


class BlockParser(StmtParser):
    """The statement parser with blocks."""

    def block_header(self, call: ast.Call, name: str, block_level: bool) -> None:
        frame = self.current_block(call, f"T.{name}", block_level)
        if name in ("reads", "writes"):
            if frame.is_root and not frame.explicit:
                self.fail(
                    call,
                    f'T.{name} of the root block needs an explicit `with T.block("root"):`',
                    f"T.{name} inside a block",
                )
            self.exprs.check_plain_call(call)
            if call.keywords:
                self.fail(call.keywords[0], f"T.{name} takes no keyword arguments", f"T.{name}(A[i, 0:4], ...)")
            nodes = list(call.args)
            if len(nodes) == 1 and isinstance(nodes[0], (ast.List, ast.Tuple)):
                nodes = list(nodes[0].elts)
            if getattr(frame, f"{name[:-1]}_nodes") is not None:
                self.fail(
                    call, f"T.{name} is given twice in block '{frame.name}'", f"one T.{name}(...) listing every region"
                )
            setattr(frame, f"{name[:-1]}_nodes", nodes)
        elif name == "where":
            if frame.is_root:
                self.fail(call, "the root block has no predicate", "T.where(...) inside a block")
            bound, _ = self.exprs.bind(call, "where", ["predicate"], 1, "T.where(i < n)")
            if frame.predicate is not None:
                self.fail(call, f"T.where is given twice in block '{frame.name}'", "one T.where(a and b)")
            frame.predicate = self.exprs.condition(bound["predicate"], "T.where")
        elif name == "block_attr":
            bound, _ = self.exprs.bind(call, "block_attr", ["attrs"], 1, 'T.block_attr({"key": value})')
            attrs = self.exprs.eval(bound["attrs"])
            if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
                self.fail(
                    bound["attrs"],
                    f"T.block_attr needs a dict with string keys, got {describe(attrs)}",
                    'T.block_attr({"key": value})',
                )
            frame.annotations.update(attrs)

    def define_block_name(self, frame: BlockFrame, target: ast.Name, value: Any) -> None:
        if target.id in frame.iter_names or (self.scope.defined_in_innermost(target.id) and not frame.is_root):
            self.fail(
                target,
                f"'{target.id}' is defined twice in block '{frame.name}'",
                "distinct names for iterators and buffers",
            )
        if isinstance(value, Var):
            frame.iter_names.add(target.id)
        self.scope.define(target.id, value)

    def parse_match_buffer(self, target: ast.Name, call: ast.Call, block_level: bool) -> None:
        frame = self.current_block(call, "T.match_buffer", block_level)
        if not call.args:
            self.fail(
                call, "T.match_buffer needs a source region", 'Asub = T.match_buffer(A[0:4, 0:4], (4, 4), "float32")'
            )
        source_node = call.args[0]
        first = self.marker_of(source_node)
        if isinstance(first, Var) and first.dtype.is_handle:
            self.fail(
                source_node,
                "a handle can only be matched at the top level of the function",
                "A = T.match_buffer(a, shape, dtype) in the function body",
            )
        region = self.exprs.region(source_node, "T.match_buffer")
        rest = ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords)
        ast.copy_location(rest, call)
        buffer = self.make_buffer(
            rest,
            target.id,
            "match_buffer",
            BUFFER_PARAMS,
            'T.match_buffer(A[0:4, 0:4], (4, 4), "float32")',
            span=self.span(target),
        )
        if buffer.dtype != region.buffer.dtype:
            self.fail(
                call,
                f"T.match_buffer of '{region.buffer.name}' ({region.buffer.dtype}) declares dtype {buffer.dtype}",
                f'the source dtype "{region.buffer.dtype}"',
            )
        self.define_block_name(frame, target, buffer)
        frame.match_buffers.append(MatchBufferRegion(buffer, region, span=self.span(call)))

    def parse_axis(self, target: ast.Name, call: ast.Call, name: str, block_level: bool) -> None:
        frame = self.current_block(call, f"T.{name}", block_level)
        usage = f"vi = T.{name}(extent, i) or T.{name}((lo, hi), i)"
        if frame.is_root:
            self.fail(call, "the root block has no iterators", f'{usage} inside `with T.block("name"):`')
        bound, _ = self.exprs.bind(call, name, ["dom", "binding"], 2, usage)
        binding = self.exprs.value(bound["binding"], "an integer binding")
        dom_node = bound["dom"]
        if isinstance(binding, PrimExpr):
            dtype = binding.dtype
        else:
            dtype = self.domain_dtype(dom_node)
            binding = self.exprs.integer(bound["binding"], "iterator binding", dtype)
        if not binding.dtype.is_integer or binding.dtype.lanes != 1:
            self.fail(
                bound["binding"],
                f"an iterator binding must be a scalar integer, got {binding.dtype}",
                "an expression of loop variables",
            )
        dom = self.domain(dom_node, dtype)
        self.add_iter(
            frame,
            target,
            IterVar(Var(target.id, dtype, span=self.span(target)), dom, _AXIS_KINDS[name], span=self.span(call)),
            binding,
        )

    def domain_dtype(self, node: ast.expr) -> DataType:
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        for part in parts:
            value = self.exprs.value(part, "an integer bound")
            if isinstance(value, PrimExpr):
                return value.dtype
        return as_dtype("int32")

    def domain(self, node: ast.expr, dtype: DataType) -> Range:
        if isinstance(node, ast.Tuple):
            if len(node.elts) != 2:
                self.fail(node, f"an iterator domain is an extent or (lo, hi), got {len(node.elts)} values", "(lo, hi)")
            lo_node, hi_node = node.elts
            lo = self.exprs.value(lo_node, "an integer bound")
            hi = self.exprs.value(hi_node, "an integer bound")
            if isinstance(lo, int) and not isinstance(lo, bool) and isinstance(hi, int) and not isinstance(hi, bool):
                lo_e, ext = self.exprs.literal(lo, dtype, lo_node), self.exprs.literal(hi - lo, dtype, hi_node)
            else:
                lo_e, ext = self.exprs.bounds(lo, hi, lo_node, hi_node, "an iterator bound", node)
        else:
            ext = self.exprs.integer(node, "iterator extent", dtype)
            lo_e = zero(ext.dtype)
        if ext.dtype != dtype or lo_e.dtype != dtype:
            self.fail(
                node,
                f"the iterator domain has dtype {ext.dtype} but its binding has dtype {dtype}",
                "a domain and binding of one dtype",
            )
        return Range(lo_e, ext, span=self.span(node))

    def add_iter(self, frame: BlockFrame, target: ast.Name, iter_var: IterVar, binding: PrimExpr) -> None:
        if target.id in frame.iter_names:
            self.fail(
                target,
                f"block iterator '{target.id}' is defined twice in block '{frame.name}'",
                "one definition per iterator",
            )
        self.define_block_name(frame, target, iter_var.var)
        frame.iter_vars.append(iter_var)
        frame.bindings.append(binding)

    def parse_remap(self, targets: list[ast.expr], call: ast.Call, block_level: bool, target_node: ast.expr) -> None:
        frame = self.current_block(call, "T.remap", block_level)
        usage = 'vi, vj, vk = T.remap("SSR", i, j, k)'
        if frame.is_root:
            self.fail(call, "the root block has no iterators", f'{usage} inside `with T.block("name"):`')
        bound, loops = self.exprs.bind(call, "remap", ["kinds"], 1, usage, variadic=True)
        if len(loops) == 1 and isinstance(loops[0], (ast.List, ast.Tuple)):
            loops = list(loops[0].elts)  # TVM's T.axis.remap("SSR", [i, j, k])
        kinds = self.exprs.string(bound["kinds"], "the T.remap kinds")
        for position, letter in enumerate(kinds):
            if letter not in _REMAP_KINDS:
                kinds_node = bound["kinds"]
                span = self.span(kinds_node)
                if isinstance(kinds_node, ast.Constant) and kinds_node.lineno == kinds_node.end_lineno:
                    col = kinds_node.col_offset + 1 + position
                    span = Span(span.file, span.line, col, span.line, col + 1)
                self.fail(
                    span,
                    f"T.remap kind '{letter}' is not one of S, R, O",
                    'one letter per iterator: S (spatial), R (reduce), O (opaque), e.g. "SSR"',
                )
        if len(kinds) != len(loops):
            self.fail(
                call,
                f"T.remap has {len(kinds)} kinds but {len(loops)} loop variable{'s' if len(loops) != 1 else ''}",
                usage,
            )
        if len(targets) != len(loops):
            self.fail(target_node, f"T.remap binds {len(loops)} iterators but {len(targets)} names are assigned", usage)
        for target in targets:
            if not isinstance(target, ast.Name):
                self.fail(target, "T.remap must be assigned to names", usage)
        for target, letter, loop_node in zip(targets, kinds, loops):
            assert isinstance(target, ast.Name)
            loop_var = self.exprs.eval(loop_node)
            if not (isinstance(loop_var, Var) and loop_var in self.scope.loop_ranges):
                self.fail(
                    loop_node,
                    f"T.remap binds iterators to loop variables; {describe(loop_var) if not isinstance(loop_var, PrimExpr) else 'this expression'} is not the variable of an enclosing loop",
                    "a variable of an enclosing for loop; use T.spatial_axis(extent, expr) for other bindings",
                )
            loop_dom = self.scope.loop_ranges[loop_var]
            dom = Range(loop_dom.min, loop_dom.extent, span=self.span(loop_node))
            var = Var(target.id, loop_var.dtype, span=self.span(target))
            self.add_iter(frame, target, IterVar(var, dom, _REMAP_KINDS[letter], span=self.span(call)), loop_var)

    def parse_init(self, node: ast.With, call: ast.Call, block_level: bool) -> None:
        frame = self.current_block(call, "T.init()", block_level)
        self.exprs.bind(call, "init", [], 0, "with T.init():")
        if frame.is_root:
            self.fail(call, "the root block has no init section", "with T.init(): inside a reduction block")
        if frame.init is not None:
            self.fail(call, f"block '{frame.name}' has two init sections", "one with T.init():")
        self.scope.push()
        frame.init = self.parse_stmts(node.body, block_level=False)
        self.scope.pop()

    def parse_block(self, node: ast.With, call: ast.Call, is_root: bool) -> BlockRealize:
        usage = 'with T.block("name"):'
        bound, _ = self.exprs.bind(call, "block", ["name"], 0, usage)
        if "name" not in bound:
            self.fail(call, "a block needs a name", usage)
        name = self.exprs.string(bound["name"], "a block name")
        frame = BlockFrame(name, is_root=is_root)
        frame.explicit = is_root
        self.blocks.append(frame)
        self.scope.push()
        body = self.parse_stmts(node.body, block_level=True)
        reads = (
            tuple(self.exprs.region(n, "T.reads") for n in frame.read_nodes) if frame.read_nodes is not None else None
        )
        writes = (
            tuple(self.exprs.region(n, "T.writes") for n in frame.write_nodes)
            if frame.write_nodes is not None
            else None
        )
        self.scope.pop()
        self.blocks.pop()
        block = Block(
            name,
            tuple(frame.iter_vars),
            reads or (),
            writes or (),
            body,
            frame.init,
            tuple(frame.alloc_buffers),
            tuple(frame.match_buffers),
            frame.annotations,
            span=self.span(node),
        )
        if not is_root and (reads is None or writes is None):
            inferred_reads, inferred_writes = _infer_access(block, self.source, call)
            block = block.replace(
                reads=inferred_reads if reads is None else reads,
                writes=inferred_writes if writes is None else writes,
            )
        predicate = frame.predicate if frame.predicate is not None else true_const()
        return BlockRealize(tuple(frame.bindings), predicate, block, span=self.span(node))


def _infer_access(
    block: Block, source: Source, node: ast.AST
) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """Read and write regions of a block whose script omits ``T.reads`` / ``T.writes``."""
    try:
        from tir.analysis.block_access import infer_block_access
    except ImportError as exc:
        raise script_error(
            source,
            node,
            f"block '{block.name}' omits T.reads/T.writes and region inference is unavailable ({exc})",
            "explicit T.reads(...) and T.writes(...)",
        ) from exc
    reads, writes = infer_block_access(block)
    return tuple(reads), tuple(writes)
