"""One visitor and one mutator base class for every IR node.

Both dispatch on the node's class: ``visit_Add`` handles ``Add``; a class without its own
method falls back to its bases' (``visit_BinaryOp``), then to the generic walk over the
node's fields. Variables in definition position (a loop's ``loop_var``, an iterator's
``var``, a ``Let`` variable) are not visited by the generic walk: a substitution must not
turn a definition into an expression. ``Buffer`` objects are visited through
``visit_Buffer``; the mutator's default keeps buffers as they are (their identity is their
meaning), so subclasses override it to remap buffers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from tir.ir.buffer import Buffer
from tir.ir.expr import BufferLoad, PrimExpr, Var
from tir.ir.node import Node

_DEFINITION_FIELDS = {("For", "loop_var"), ("IterVar", "var"), ("Let", "var"), ("LetStmt", "var")}


#: Node class -> the fields the generic walk visits (computed once per class).
_WALK_FIELDS: dict[type, tuple[str, ...]] = {}


def _walk_fields(cls: type[Node]) -> tuple[str, ...]:
    fields = _WALK_FIELDS.get(cls)
    if fields is None:
        fields = tuple(name for name in cls.child_fields() if (cls.__name__, name) not in _DEFINITION_FIELDS)
        _WALK_FIELDS[cls] = fields
    return fields


class _Dispatch:
    _dispatch_cache: ClassVar[dict[type, Callable[..., Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_cache = {}

    def _method_for(self, node_cls: type) -> Callable[..., Any]:
        cache = type(self)._dispatch_cache
        method = cache.get(node_cls)
        if method is None:
            method = type(self).generic_visit  # type: ignore[attr-defined]
            for base in node_cls.__mro__:
                candidate = getattr(type(self), "visit_" + base.__name__, None)
                if candidate is not None:
                    method = candidate
                    break
            cache[node_cls] = method
        return method


class IRVisitor(_Dispatch):
    """Walks an IR tree; override ``visit_X`` to act on nodes of class X."""

    _dispatch_cache = {}

    def visit(self, node: Any) -> None:
        if isinstance(node, Node):
            # The dispatch cache is read here rather than through _method_for: this is the
            # compiler's hottest call (every pass walks every node).
            method = self._dispatch_cache.get(type(node)) or self._method_for(type(node))
            method(self, node)
        elif isinstance(node, tuple):
            for item in node:
                self.visit(item)

    def generic_visit(self, node: Node) -> None:
        cls = type(node)
        for name in _WALK_FIELDS.get(cls) or _walk_fields(cls):
            value = getattr(node, name)
            if isinstance(value, (Node, tuple)):
                self.visit(value)


class IRMutator(_Dispatch):
    """Rebuilds an IR tree bottom-up; a node whose children are unchanged is kept as is."""

    _dispatch_cache = {}

    def visit(self, node: Any) -> Any:
        if isinstance(node, Node):
            method = self._dispatch_cache.get(type(node)) or self._method_for(type(node))
            return method(self, node)
        if isinstance(node, tuple):
            items = tuple(self.visit(item) for item in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        return node

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return buffer

    def generic_visit(self, node: Node) -> Node:
        changes = {}
        cls = type(node)
        for name in _WALK_FIELDS.get(cls) or _walk_fields(cls):
            value = getattr(node, name)
            if isinstance(value, (Node, tuple)):
                new_value = self.visit(value)
                if new_value is not value:
                    changes[name] = new_value
        return node.replace(**changes) if changes else node


class _PostOrder(IRVisitor):
    def __init__(self, callback: Callable[[Node], None]) -> None:
        self.callback = callback

    def generic_visit(self, n: Node) -> None:
        super().generic_visit(n)
        self.callback(n)


def post_order_visit(node: Node, callback: Callable[[Node], None]) -> None:
    """Call ``callback`` on every node under ``node`` (children first), buffers included."""
    _PostOrder(callback).visit(node)


class _UsedVars(IRVisitor):
    def __init__(self) -> None:
        self.found: dict[int, Var] = {}

    def visit_Var(self, var: Var) -> None:
        self.found.setdefault(id(var), var)


def free_vars(node: Any) -> list[Var]:
    """Every variable that appears under ``node`` (``node`` may be an expression, a statement, a
    tuple of them or a whole function), once each, in first-appearance order. Loop variables,
    block iterators and let variables defined inside ``node`` are included: callers that need
    only the variables bound outside subtract what they define.

    >>> from tir.ir import Var
    >>> x, y = Var("x", "int32"), Var("y", "int32")
    >>> [v.name for v in free_vars((x + y) * x)]
    ['x', 'y']
    """
    finder = _UsedVars()
    finder.visit(node)
    return list(finder.found.values())


def buffer_loads(node: Any) -> list[BufferLoad]:
    """Every buffer load under ``node``, in post order (repeats included).

    >>> from tir.ir import Buffer, Var, as_dtype
    >>> A, i = Buffer("A", (8,), as_dtype("float32")), Var("i", "int32")
    >>> [str(load) for load in buffer_loads(A[i] + A[i + 1])]
    ['A[i]', 'A[i + 1]']
    """
    found: list[BufferLoad] = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, BufferLoad) else None)
    return found


class _Contains(IRVisitor):
    def __init__(self, classes: type | tuple[type, ...]) -> None:
        self.classes = classes
        self.found = False

    def visit(self, node: Any) -> None:
        if not self.found:
            super().visit(node)

    def generic_visit(self, node: Node) -> None:
        if isinstance(node, self.classes):
            self.found = True
        else:
            super().generic_visit(node)


def contains(node: Any, classes: type | tuple[type, ...]) -> bool:
    """Whether a node of ``classes`` is anywhere under ``node`` (``node`` itself included);
    the walk stops at the first."""
    finder = _Contains(classes)
    finder.visit(node)
    return finder.found


class _Substitute(IRMutator):
    def __init__(self, vmap: dict[Var, PrimExpr]) -> None:
        self.vmap = vmap

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vmap.get(var, var)


def substitute(node: Any, vmap: dict[Var, PrimExpr]) -> Any:
    """Replace uses of variables (not definitions) by expressions."""
    if not vmap:
        return node
    return _Substitute(vmap).visit(node)


class _ReplaceBuffers(IRMutator):
    def __init__(self, buffer_map: Mapping[Buffer, Buffer]) -> None:
        self.buffer_map = buffer_map

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.buffer_map.get(buffer, buffer)


def replace_buffers(node: Any, buffer_map: Mapping[Buffer, Buffer]) -> Any:
    """Every reference to a buffer of ``buffer_map`` (by identity: parameters, loads, stores,
    regions, allocations, match_buffer sources) made to its replacement instead."""
    if not buffer_map:
        return node
    return _ReplaceBuffers(buffer_map).visit(node)
