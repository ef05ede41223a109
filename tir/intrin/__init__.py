"""Tensor intrinsics: a semantics function and an implementation, registered by name.

    TensorIntrin.register("my_dot4", dot4_desc, dot4_impl, targets=("llvm",))
    TensorIntrin.get("my_dot4")
    TensorIntrin.list(target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")
    sch.tensorize(loop_or_block, "my_dot4")

``desc`` says what the intrinsic computes, with ordinary blocks; ``impl`` says how (vector
ops, ``T.call_llvm_intrin``, CUDA fragment calls). Both are ``@T.script`` functions with the
same buffer parameters (shape, dtype, scope); their body is one root block whose ``T.reads`` /
``T.writes`` state the regions the intrinsic touches. ``tensorize`` matches a block against
``desc`` and replaces its body with ``impl``. Registering an intrinsic needs no compiler change.

An intrinsic exact only on part of an operand's dtype range says so with ``operand_ranges``
(``{"A": (0, 127)}``); ``check_operand_ranges(intrin, func, binding)`` (``tir.intrin.ranges``)
says whether a program's declared value ranges (``T.func_attr({"value_ranges": {...}})``) fit.

The built-in intrinsics (x86-64, AArch64, NVIDIA) register themselves when ``tir.intrin`` is
imported. Intrinsics registered at run time (in a user's script) reach the tuner's worker
processes, local or on dask, through ``tir.registrations``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tir import registrations
from tir.ir import PrimFunc
from tir.target import Target


class IntrinError(ValueError):
    """An unknown intrinsic, or a malformed registration."""


@dataclass(frozen=True)
class TensorIntrin:
    """A registered tensor intrinsic.

    ``required_features``: target features (``"avx2"``, ``"dotprod"``) the implementation needs;
    ``isa``: the instruction set it is for (``"x86_64"``, ``"aarch64"``, ``"cuda"``), or ``""``
    for any. ``available(target)`` says whether a target can run it. ``operand_ranges``: the
    inclusive ``(low, high)`` value range an integer operand (a desc parameter name) must keep for
    the implementation to compute what the desc says; an operand not listed may hold any value of
    its dtype (see ``tir.intrin.ranges.check_operand_ranges``).
    """

    name: str
    desc: PrimFunc
    impl: PrimFunc
    isa: str = ""
    required_features: tuple[str, ...] = ()
    doc: str = ""
    extra_check: Callable[[Target], bool] | None = field(default=None, compare=False)
    operand_ranges: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    builtin: bool = field(default=False, compare=False)  # registered by tensorir's own modules

    def available(self, target: str | Target | None) -> bool:
        resolved = Target.parse(target)
        if self.isa and resolved.isa != self.isa:
            return False
        if not all(resolved.has(feature) for feature in self.required_features):
            return False
        return self.extra_check is None or self.extra_check(resolved)

    # ---------------------------------------------------------------- registry

    @staticmethod
    def register(
        name: str,
        desc: PrimFunc,
        impl: PrimFunc,
        isa: str = "",
        required_features: tuple[str, ...] = (),
        doc: str = "",
        override: bool = False,
        extra_check: Callable[[Target], bool] | None = None,
        operand_ranges: Mapping[str, tuple[int, int]] | None = None,
        builtin: bool = False,
    ) -> TensorIntrin:
        """Register ``desc`` / ``impl`` under ``name``; refuses a second registration unless
        ``override``. Checks that both have buffer parameters of the same shapes and dtypes, and
        that ``operand_ranges`` (``{"A": (0, 127)}``) names integer desc parameters with ranges
        inside their dtypes. ``builtin`` is for tensorir's own modules (every process has those
        intrinsics): any other registration is shipped to the tuner's worker processes."""
        if not isinstance(desc, PrimFunc) or not isinstance(impl, PrimFunc):
            raise IntrinError(f"intrinsic {name!r}: desc and impl must be @T.script functions")
        if name in _REGISTRY and not override:
            raise IntrinError(f"intrinsic {name!r} is already registered (pass override=True to replace it)")
        desc_buffers, impl_buffers = desc.buffer_params, impl.buffer_params
        if len(desc_buffers) != len(impl_buffers):
            raise IntrinError(
                f"intrinsic {name!r}: desc has {len(desc_buffers)} buffer parameters, impl {len(impl_buffers)}"
            )
        for d, i in zip(desc_buffers, impl_buffers):
            if d.dtype != i.dtype or len(d.shape) != len(i.shape) or d.const_shape() != i.const_shape():
                raise IntrinError(
                    f"intrinsic {name!r}: parameter {d.name} is {d.dtype}{list(map(str, d.shape))} in desc "
                    f"but {i.dtype}{list(map(str, i.shape))} in impl"
                )
        ranges = _check_operand_ranges(name, desc, operand_ranges or {})
        intrin = TensorIntrin(name, desc, impl, isa, tuple(required_features), doc, extra_check, ranges, builtin)
        _REGISTRY[name] = intrin
        registrations.changed()
        return intrin

    @staticmethod
    def get(name: str) -> TensorIntrin:
        """The intrinsic named ``name``; an unknown name suggests the closest registered ones."""
        _load_builtins()
        found = _REGISTRY.get(name)
        if found is None:
            close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise IntrinError(f"no tensor intrinsic named {name!r}{hint} (TensorIntrin.list() shows them all)")
        return found

    @staticmethod
    def list(target: str | Target | None = None) -> list[str]:
        """Names of the registered intrinsics (those a target can run, when given), sorted."""
        _load_builtins()
        if target is None:
            return sorted(_REGISTRY)
        return sorted(name for name, intrin in _REGISTRY.items() if intrin.available(target))


def _check_operand_ranges(
    name: str, desc: PrimFunc, operand_ranges: Mapping[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    from tir.intrin.ranges import parse_range

    by_name = {buffer.name: buffer for buffer in desc.buffer_params}
    checked = {}
    for operand, value in operand_ranges.items():
        buffer = by_name.get(operand)
        if buffer is None or not buffer.dtype.is_integer:
            raise IntrinError(
                f"intrinsic {name!r}: operand_ranges names {operand!r}, which is not an integer buffer "
                f"parameter of its desc (parameters: {', '.join(by_name)})"
            )
        try:
            checked[operand] = parse_range(value, buffer.dtype, f"intrinsic {name!r}: operand_ranges of {operand}")
        except ValueError as error:
            raise IntrinError(str(error)) from None
    return checked


_REGISTRY: dict[str, TensorIntrin] = {}
_BUILTINS_LOADED = False


def runtime_registrations() -> list[tuple[str, TensorIntrin]]:
    """The intrinsics registered at run time (not built in): ``tir.registrations`` ships them."""
    return [(f"tensor intrinsic {name!r}", intrin) for name, intrin in _REGISTRY.items() if not intrin.builtin]


def install_registration(intrin: TensorIntrin) -> None:
    """Register an intrinsic received from the tuning process (replacing one of the same name)."""
    _REGISTRY[intrin.name] = intrin
    registrations.changed()


def _load_builtins() -> None:
    """Import the built-in intrinsic modules once (they call ``TensorIntrin.register``)."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    import importlib

    for module in ("tir.intrin.x86", "tir.intrin.arm", "tir.intrin.cuda"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise


registrations.add_provider(__name__)

from tir.intrin.ranges import VALUE_RANGES_ATTR, check_operand_ranges, declared_value_ranges  # noqa: E402

__all__ = ["VALUE_RANGES_ATTR", "IntrinError", "TensorIntrin", "check_operand_ranges", "declared_value_ranges"]
