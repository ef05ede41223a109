"""Rule ``well-formed``: scoping of variables and buffers, block names, iterator kinds.

Exact checks (each reported against the block, loop or function where it fails):

- Every variable is used inside its scope: scalar parameters and the variables of parameter
  buffer shapes everywhere; a loop variable inside its loop; a block iterator inside its block
  (body, init, read/write regions, allocations and match_buffers, nested blocks) but not in
  the block's own bindings, predicate or iterator domains; a ``LetStmt`` / ``Let`` variable
  in its body; a variable first named by a ``match_buffer`` shape inside that block.
- A block with iterators (not opaque) sees enclosing loops only through its bindings: its
  body, init and regions do not use the variable of a loop outside it.
- No variable is defined again while it is in scope (loops, iterators and lets shadow nothing).
- Block names are unique in the function.
- Every buffer a load, store, region or match_buffer names is declared where it is used: a
  parameter, an ``alloc_buffer`` or ``match_buffer`` of an enclosing block (a block's own
  regions may name its own allocations), or an enclosing ``Allocate``; no buffer is
  allocated twice. Loads, stores and regions have one index per buffer dimension.
- Iterator kinds: a reduce iterator appears neither in the block's write regions nor in the
  indices of the stores its body and init make (let-bound values followed); a spatial
  iterator whose domain is not a single point, bound to a non-constant, in a block without
  predicate, appears in a write region or a store index (a block writing nothing is exempt).
  ``T.init()`` is allowed in a block without reduce iterators (``rfactor`` of an unsplit loop
  makes one): it then runs on every instance.
- A constant buffer (``T.allocate_const``) is allocated by a block and written by none.
- Writes are declared: every buffer a block stores to (directly, through its match_buffer
  views, or through nested blocks' writes), other than buffers allocated inside it, is in the
  block's ``T.writes``. The root block is exempt (its signature is never inferred).
"""

from __future__ import annotations

from tir.analysis.verify._context import Program, Violation, block_target, fragment, loop_target
from tir.ir.buffer import Buffer, BufferRegion, Range
from tir.ir.expr import BufferLoad, IntImm, IterKind, Let, PrimExpr, Ramp, Var
from tir.ir.functor import substitute
from tir.ir.node import Node
from tir.ir.stmt import Allocate, Block, BlockRealize, BufferStore, For, LetStmt, SeqStmt, Stmt

RULE = "well-formed"


def _free_vars(node: object, found: dict[int, Var] | None = None) -> dict[int, Var]:
    found = {} if found is None else found
    if isinstance(node, Var):
        found[id(node)] = node
    elif isinstance(node, Range):
        _free_vars(node.min, found)
        _free_vars(node.extent, found)
    elif isinstance(node, BufferRegion):
        for dom in node.region:
            _free_vars(dom, found)
    elif isinstance(node, PrimExpr):
        for name in type(node).child_fields():
            value = getattr(node, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, (PrimExpr, Range)):
                    _free_vars(item, found)
    return found


class _Scopes:
    """Checks variable and buffer scoping in one walk over the function."""

    def __init__(self, program: Program, out: list[Violation]) -> None:
        self.out = out
        self.func = program.func
        self.vars: dict[int, int] = {}  # id(var) -> depth of blocks at its definition
        self.loop_vars: set[int] = set()
        self.buffers: set[int] = set()
        self.allocated: set[int] = set()
        self.blocks: list[tuple[Block, bool]] = []  # (block, has iterators)
        self.reported: set[tuple[int, int]] = set()
        self.where: Node | None = None
        self.where_target = f"function {self.func.name!r}"

    # ------------------------------------------------------------ reporting

    def report(self, key: tuple[int, int], message: str) -> None:
        if key in self.reported:
            return
        self.reported.add(key)
        self.out.append(Violation(RULE, self.where_target, message, fragment(self.where)))

    def at(self, node: Node, target: str) -> tuple[Node | None, str]:
        saved = (self.where, self.where_target)
        self.where, self.where_target = node, target
        return saved

    # ------------------------------------------------------------ definitions

    def define(self, var: Var, what: str) -> None:
        if id(var) in self.vars:
            self.report((id(var), 0), f"{what} {var.name} is defined again while already in scope")
        self.vars[id(var)] = len(self.blocks)

    def undefine(self, var: Var) -> None:
        self.vars.pop(id(var), None)
        self.loop_vars.discard(id(var))

    def declare(self, buffer: Buffer, what: str) -> None:
        if id(buffer) in self.allocated:
            self.report((id(buffer), 1), f"buffer {buffer.name} is {what} twice")
        self.allocated.add(id(buffer))
        self.buffers.add(id(buffer))
        self.shape_vars(buffer, define_new=False)

    def shape_vars(self, buffer: Buffer, define_new: bool) -> list[Var]:
        """Check (or, for match_buffer views, define) the variables of a buffer's shape."""
        new: list[Var] = []
        negative = [dim.value for dim in buffer.shape if isinstance(dim, IntImm) and dim.value < 0]
        if negative:
            self.report((id(buffer), 3), f"buffer {buffer.name} has a negative dimension ({negative[0]})")
        for expr in (*buffer.shape, *buffer.strides, *([buffer.elem_offset] if buffer.elem_offset is not None else [])):
            for var in _free_vars(expr).values():
                if id(var) in self.vars:
                    continue
                if define_new:
                    self.vars[id(var)] = len(self.blocks)
                    new.append(var)
                else:
                    self.use(var)
        return new

    # ------------------------------------------------------------ uses

    def use(self, var: Var) -> None:
        depth = self.vars.get(id(var))
        if depth is None:
            self.report((id(var), 2), f"variable {var.name} is used outside its scope (or never defined)")
            return
        if id(var) in self.loop_vars:
            # the innermost enclosing block with iterators must not see loops outside it
            for index in range(len(self.blocks) - 1, -1, -1):
                block, has_iters = self.blocks[index]
                if has_iters:
                    if depth <= index:
                        self.report(
                            (id(var), id(block)),
                            f"block {block.name!r} uses the variable {var.name} of a loop outside it; "
                            "a block sees enclosing loops only through its iterator bindings",
                        )
                    break

    def use_buffer(self, buffer: Buffer, indices: tuple[PrimExpr, ...] | None) -> None:
        if id(buffer) not in self.buffers:
            self.report((id(buffer), 3), f"buffer {buffer.name} is used where it is not declared")
        if indices is not None and len(indices) != len(buffer.shape):
            self.report(
                (id(buffer), 4), f"buffer {buffer.name} has {len(buffer.shape)} dimensions but is indexed with {len(indices)}"
            )

    def expr(self, expr: PrimExpr | None) -> None:
        if expr is None:
            return
        if isinstance(expr, Var):
            self.use(expr)
            return
        if isinstance(expr, BufferLoad):
            self.use_buffer(expr.buffer, expr.indices)
        if isinstance(expr, Let):
            self.expr(expr.value)
            self.define(expr.var, "let variable")
            self.expr(expr.body)
            self.undefine(expr.var)
            return
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, PrimExpr):
                    self.expr(item)

    def region(self, region: BufferRegion) -> None:
        self.use_buffer(region.buffer, None)
        for dom in region.region:
            self.expr(dom.min)
            self.expr(dom.extent)

    # ------------------------------------------------------------ statements

    def function(self) -> None:
        for param in self.func.params:
            if isinstance(param, Var):
                self.vars[id(param)] = 0
        for param in self.func.params:
            if isinstance(param, Buffer):
                self.buffers.add(id(param))
                self.allocated.add(id(param))
                self.shape_vars(param, define_new=True)
        self.stmt(self.func.body)

    def stmt(self, stmt: Stmt | None) -> None:
        if stmt is None:
            return
        if isinstance(stmt, SeqStmt):
            for item in stmt.stmts:
                self.stmt(item)
        elif isinstance(stmt, For):
            saved = self.at(stmt, loop_target(stmt))
            self.expr(stmt.min)
            self.expr(stmt.extent)
            self.define(stmt.loop_var, "loop variable")
            self.loop_vars.add(id(stmt.loop_var))
            self.where, self.where_target = saved
            self.stmt(stmt.body)
            self.undefine(stmt.loop_var)
        elif isinstance(stmt, BlockRealize):
            saved = self.at(stmt, block_target(stmt.block))
            for value in stmt.iter_values:
                self.expr(value)
            self.expr(stmt.predicate)
            self.block(stmt.block)
            self.where, self.where_target = saved
        elif isinstance(stmt, Block):
            saved = self.at(stmt, block_target(stmt))
            self.block(stmt)
            self.where, self.where_target = saved
        elif isinstance(stmt, BufferStore):
            self.use_buffer(stmt.buffer, stmt.indices)
            self.expr(stmt.value)
            for index in stmt.indices:
                self.expr(index)
        elif isinstance(stmt, LetStmt):
            self.expr(stmt.value)
            self.define(stmt.var, "let variable")
            self.stmt(stmt.body)
            self.undefine(stmt.var)
        elif isinstance(stmt, Allocate):
            self.declare(stmt.buffer, "allocated")
            self.stmt(stmt.body)
            self.buffers.discard(id(stmt.buffer))
        else:
            for name in type(stmt).child_fields():
                value = getattr(stmt, name)
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, PrimExpr):
                        self.expr(item)
                    elif isinstance(item, Stmt):
                        self.stmt(item)

    def block(self, block: Block) -> None:
        if self.where is None or not isinstance(self.where, (Block, BlockRealize)):
            self.where, self.where_target = block, block_target(block)
        for iv in block.iter_vars:
            self.expr(iv.dom.min)
            self.expr(iv.dom.extent)
        self.blocks.append((block, bool(block.iter_vars)))
        for iv in block.iter_vars:
            self.define(iv.var, "block iterator")
        for buffer in block.alloc_buffers:
            self.declare(buffer, "allocated")
        views: list[Buffer] = []
        new_vars: list[Var] = []
        for match in block.match_buffers:
            self.region(match.source)
            # The view's shape / stride variables are defined by the match itself, so bind them
            # before declaring the view (which checks its shape's variables as uses).
            new_vars.extend(self.shape_vars(match.buffer, define_new=True))
            self.declare(match.buffer, "declared (match_buffer)")
            views.append(match.buffer)
        for region in (*block.reads, *block.writes):
            self.region(region)
        self.stmt(block.init)
        self.stmt(block.body)
        for var in new_vars:
            self.undefine(var)
        for buffer in (*block.alloc_buffers, *views):
            self.buffers.discard(id(buffer))
        for iv in block.iter_vars:
            self.undefine(iv.var)
        self.blocks.pop()


# ---------------------------------------------------------------- per-block checks


def _direct_stores(block: Block) -> list[tuple[BufferStore, dict[Var, PrimExpr]]]:
    """Stores in the block's init and body outside nested blocks, with the lets around them."""
    found: list[tuple[BufferStore, dict[Var, PrimExpr]]] = []

    def visit(stmt: Stmt | None, lets: dict[Var, PrimExpr]) -> None:
        if stmt is None or isinstance(stmt, (BlockRealize, Block)):
            return
        if isinstance(stmt, BufferStore):
            found.append((stmt, lets))
        elif isinstance(stmt, LetStmt):
            visit(stmt.body, {**lets, stmt.var: substitute(stmt.value, lets)})
        else:
            for name in type(stmt).child_fields():
                value = getattr(stmt, name)
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, Stmt):
                        visit(item, lets)

    visit(block.init, {})
    visit(block.body, {})
    return found


def _nested(block: Block) -> tuple[list[Block], set[int]]:
    """Blocks directly nested in ``block`` (not deeper), and buffers allocated below it."""
    children: list[Block] = []
    allocated: set[int] = {id(b) for b in block.alloc_buffers}

    def visit(stmt: Stmt | None, top: bool) -> None:
        if stmt is None:
            return
        if isinstance(stmt, BlockRealize):
            stmt = stmt.block
        if isinstance(stmt, Block):
            if top:
                children.append(stmt)
            allocated.update(id(b) for b in stmt.alloc_buffers)
            visit(stmt.init, False)
            visit(stmt.body, False)
            return
        if isinstance(stmt, Allocate):
            allocated.add(id(stmt.buffer))
        for name in type(stmt).child_fields():
            value = getattr(stmt, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, Stmt):
                    visit(item, top)

    visit(block.init, True)
    visit(block.body, True)
    return children, allocated


def _index_vars(indices: tuple[PrimExpr, ...], lets: dict[Var, PrimExpr]) -> dict[int, Var]:
    found: dict[int, Var] = {}
    for index in indices:
        if isinstance(index, Ramp):
            index = index.base
        _free_vars(substitute(index, lets) if lets else index, found)
    return found


def _is_true(expr: PrimExpr | None) -> bool:
    return expr is None or (isinstance(expr, IntImm) and expr.value != 0)


def realize_predicate(node: Node) -> PrimExpr | None:
    return node.predicate if isinstance(node, BlockRealize) else None


def realize_bindings(node: Node) -> dict[int, PrimExpr]:
    if not isinstance(node, BlockRealize):
        return {}
    return {id(iv.var): value for iv, value in zip(node.block.iter_vars, node.iter_values)}


def _check_kinds(block: Block, realize: Node, out: list[Violation]) -> None:
    target = block_target(block)
    reduce_vars = {id(iv.var): iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE}
    stores = _direct_stores(block)
    write_vars: dict[int, Var] = {}
    for region in block.writes:
        _free_vars(region, write_vars)
    store_vars: dict[int, Var] = {}
    local = {id(b) for b in block.alloc_buffers}
    for store, lets in stores:
        if id(store.buffer) in local:
            continue
        store_vars.update(_index_vars(store.indices, lets))
    for var_id, var in reduce_vars.items():
        if var_id in write_vars or var_id in store_vars:
            out.append(
                Violation(
                    RULE,
                    target,
                    f"the reduce iterator {var.name} indexes what the block writes; "
                    "a reduction writes the same element for every value of it",
                    fragment(realize),
                )
            )
    if (not block.writes and not stores) or not _is_true(realize_predicate(realize)):
        return  # a predicate may pin an iterator (``T.where(j == 2)``)
    bindings = realize_bindings(realize)
    for iv in block.iter_vars:
        if iv.kind is not IterKind.SPATIAL or (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1):
            continue
        binding = bindings.get(id(iv.var))
        if binding is not None and not _free_vars(binding):
            continue  # bound to a constant: one instance
        if id(iv.var) not in write_vars and id(iv.var) not in store_vars:
            out.append(
                Violation(
                    RULE,
                    target,
                    f"the spatial iterator {iv.var.name} indexes nothing the block writes: "
                    "its instances would write the same elements (make it a reduce iterator?)",
                    fragment(realize),
                )
            )


def _check_declared_writes(block: Block, realize: Node, out: list[Violation]) -> None:
    views = {id(m.buffer): m.source.buffer for m in block.match_buffers}
    children, allocated = _nested(block)
    written: dict[int, Buffer] = {}
    for store, _ in _direct_stores(block):
        buffer = views.get(id(store.buffer), store.buffer)
        written.setdefault(id(buffer), buffer)
    for child in children:
        for region in child.writes:
            buffer = views.get(id(region.buffer), region.buffer)
            written.setdefault(id(buffer), buffer)
    declared = {id(region.buffer) for region in block.writes}
    for buffer_id, buffer in written.items():
        if buffer_id in allocated or buffer_id in declared:
            continue
        out.append(
            Violation(
                RULE,
                block_target(block),
                f"writes buffer {buffer.name} without declaring it in T.writes",
                fragment(realize),
            )
        )


def check_well_formed(program: Program) -> list[Violation]:
    """The ``well-formed`` violations of the walked program."""
    out: list[Violation] = []
    _Scopes(program, out).function()
    seen: dict[str, int] = {}
    for info in program.blocks:
        seen[info.name] = seen.get(info.name, 0) + 1
    for name, count in seen.items():
        if count > 1:
            first = next(info for info in program.blocks if info.name == name)
            out.append(
                Violation(
                    RULE,
                    f"block {name!r}",
                    f"{count} blocks are named {name!r}; block names must be unique",
                    fragment(first.realize or first.block),
                )
            )
    for info in program.blocks:
        where: Node = info.realize if info.realize is not None else info.block
        _check_kinds(info.block, where, out)
        if info.parent is not None:
            _check_declared_writes(info.block, where, out)
    out += check_constants(program)
    return out


def check_constants(program: Program) -> list[Violation]:
    """``T.allocate_const`` buffers: allocated by a block of the function, written by none."""
    out: list[Violation] = []
    constants = program.func.constants
    if not constants:
        return out
    allocated = {id(buffer) for info in program.blocks for buffer in info.block.alloc_buffers}
    for buffer in constants:
        if id(buffer) not in allocated:
            out.append(
                Violation(
                    RULE,
                    f"buffer {buffer.name!r}",
                    "a constant (T.allocate_const) that no block allocates any more: a step replaced it, "
                    "and its values would be lost",
                    "",
                )
            )
    for info in program.blocks:
        for region in info.block.writes:
            if region.buffer in constants:
                out.append(
                    Violation(
                        RULE,
                        block_target(info.block),
                        f"writes {region.buffer.name}, a constant (T.allocate_const): its values are fixed",
                        fragment(info.realize or info.block),
                    )
                )
    return out
