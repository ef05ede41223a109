"""Which target features a target-specific LLVM intrinsic needs, checked before code generation.

LLVM aborts the whole process (``LLVM ERROR: Cannot select ...``) when instruction selection meets
an intrinsic the target cannot express, so every ``T.call_llvm_intrin`` / ``call_llvm_pure_intrin``
name is checked against the target here first and refused with a ``CodegenError`` that names the
intrinsic, the missing feature(s) and the target.

The table is ordered: the first rule whose prefix matches a name decides. A rule lists
alternatives: the name is accepted when the target has every feature of at least one of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tir.ir import Buffer, Call, IRModule, IRVisitor, PrimFunc, StringImm
from tir.target import Target


class CodegenError(Exception):
    """A program the code generator refuses: names what, where, and why."""


@dataclass(frozen=True)
class IntrinsicRule:
    """Intrinsics whose name starts with ``prefix`` need ``isa`` and one of ``alternatives``."""

    prefix: str
    isa: str
    alternatives: tuple[tuple[str, ...], ...] = ((),)


def _x86(prefix: str, *alternatives: tuple[str, ...]) -> IntrinsicRule:
    return IntrinsicRule(prefix, "x86_64", alternatives or ((),))


def _arm(prefix: str, *alternatives: tuple[str, ...]) -> IntrinsicRule:
    return IntrinsicRule(prefix, "aarch64", alternatives or ((),))


#: First match wins: more specific prefixes come first.
INTRINSIC_RULES: tuple[IntrinsicRule, ...] = (
    # AVX-512 VNNI dot products; the 128/256-bit forms also exist as AVX-VNNI.
    _x86("llvm.x86.avx512.vpdpbusd.512", ("avx512vnni", "avx512f")),
    _x86("llvm.x86.avx512.vpdpbusds.512", ("avx512vnni", "avx512f")),
    _x86("llvm.x86.avx512.vpdpwssd.512", ("avx512vnni", "avx512f")),
    _x86("llvm.x86.avx512.vpdpwssds.512", ("avx512vnni", "avx512f")),
    _x86("llvm.x86.avx512.vpdp", ("avx512vnni", "avx512vl"), ("avxvnni",)),
    _x86("llvm.x86.avx512bf16.", ("avx512bf16",)),
    _x86("llvm.x86.avx512fp16.", ("avx512fp16",)),
    _x86("llvm.x86.avx512.", ("avx512f",)),
    _x86("llvm.x86.avx2.", ("avx2",)),
    _x86("llvm.x86.avx.", ("avx",)),
    _x86("llvm.x86.fma.", ("fma",)),
    _x86("llvm.x86.fma4.", ("fma4",)),
    _x86("llvm.x86.vcvtph2ps", ("f16c",)),
    _x86("llvm.x86.vcvtps2ph", ("f16c",)),
    _x86("llvm.x86.ssse3.", ("ssse3",)),
    _x86("llvm.x86.sse41.", ("sse4.1",)),
    _x86("llvm.x86.sse42.", ("sse4.2",)),
    _x86("llvm.x86.sse3.", ("sse3",)),
    _x86("llvm.x86.sse2.", ("sse2",)),
    _x86("llvm.x86.sse.", ("sse",)),
    _x86("llvm.x86.amx.", ("amx-tile",)),
    _x86("llvm.x86."),
    _arm("llvm.aarch64.neon.sdot", ("dotprod",)),
    _arm("llvm.aarch64.neon.udot", ("dotprod",)),
    _arm("llvm.aarch64.neon.usdot", ("i8mm",)),
    _arm("llvm.aarch64.neon.smmla", ("i8mm",)),
    _arm("llvm.aarch64.neon.ummla", ("i8mm",)),
    _arm("llvm.aarch64.neon.usmmla", ("i8mm",)),
    _arm("llvm.aarch64.neon.bfdot", ("bf16",)),
    _arm("llvm.aarch64.neon.bfmmla", ("bf16",)),
    _arm("llvm.aarch64.neon.bfmlal", ("bf16",)),
    _arm("llvm.aarch64.neon.", ("neon",)),
    _arm("llvm.aarch64.sve.", ("sve",)),
    _arm("llvm.aarch64.sme.", ("sme",)),
    _arm("llvm.aarch64."),
)

#: Prefixes of intrinsics no CPU target of this project can run.
_FOREIGN_PREFIXES = ("llvm.arm.", "llvm.nvvm.", "llvm.amdgcn.", "llvm.ppc.", "llvm.riscv.", "llvm.wasm.")


def rule_for(name: str) -> IntrinsicRule | None:
    """The rule deciding about intrinsic ``name`` (None: a target-independent intrinsic)."""
    for rule in INTRINSIC_RULES:
        if name.startswith(rule.prefix):
            return rule
    return None


def missing_features(name: str, target: Target) -> tuple[str, ...] | None:
    """Features ``target`` lacks for intrinsic ``name``: ``()`` when none, None when the ISA is wrong."""
    if name.startswith(_FOREIGN_PREFIXES):
        return None
    rule = rule_for(name)
    if rule is None:
        return ()
    if target.isa != rule.isa:
        return None
    best: tuple[str, ...] | None = None
    for alternative in rule.alternatives:
        lacking = tuple(feature for feature in alternative if not target.has(feature))
        if best is None or len(lacking) < len(best):
            best = lacking
    return best or ()


def check_intrinsic(name: str, target: Target, where: str = "") -> None:
    """Raise ``CodegenError`` when ``target`` cannot run the LLVM intrinsic ``name``."""
    if not name.startswith("llvm."):
        raise CodegenError(f"{where}call_llvm_intrin name {name!r} does not start with 'llvm.'")
    lacking = missing_features(name, target)
    target_text = f"{target.text or 'llvm'!r} (triple {target.triple}, cpu {target.cpu or 'generic'})"
    if lacking is None:
        rule = rule_for(name)
        needs = f"an {rule.isa} target" if rule is not None else "a target this project does not support"
        raise CodegenError(f"{where}intrinsic {name} needs {needs}; the target is {target_text}")
    if lacking:
        rule = rule_for(name)
        assert rule is not None
        options = " or ".join("+".join(alt) for alt in rule.alternatives)
        raise CodegenError(
            f"{where}intrinsic {name} needs target feature(s) {', '.join(lacking)} ({options}), "
            f"which the target {target_text} lacks; add them with -mattr=+{',+'.join(lacking)} "
            "or choose a CPU that has them"
        )


class _IntrinsicCalls(IRVisitor):
    """The LLVM intrinsic calls of a function body, in post order; each buffer's fields are
    walked once (a plain post-order walk re-walked a buffer's shape at every access)."""

    def __init__(self, func_name: str, found: list[tuple[str, str]]) -> None:
        self.func_name = func_name
        self.found = found
        self.buffers: set[Buffer] = set()

    def visit_Buffer(self, buffer: Buffer) -> None:
        if buffer not in self.buffers:
            self.buffers.add(buffer)
            self.generic_visit(buffer)

    def visit_Call(self, node: Call) -> None:
        self.generic_visit(node)
        if node.op in ("call_llvm_intrin", "call_llvm_pure_intrin"):
            if not node.args or not isinstance(node.args[0], StringImm):
                raise CodegenError(f"function {self.func_name}: {node.op} needs the intrinsic name as first argument")
            self.found.append((self.func_name, node.args[0].value))


def intrinsic_calls(funcs: Iterable[PrimFunc]) -> list[tuple[str, str]]:
    """``(function name, intrinsic name)`` of every LLVM intrinsic call in ``funcs``."""
    found: list[tuple[str, str]] = []
    for func in funcs:
        _IntrinsicCalls(func.name, found).visit(func.body)
    return found


def check_module_intrinsics(mod: IRModule | PrimFunc, target: Target) -> None:
    """Check every LLVM intrinsic call of ``mod`` against ``target`` (``CodegenError`` if any fails)."""
    funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
    for func_name, name in intrinsic_calls(funcs):
        check_intrinsic(name, target, where=f"function {func_name}: ")
