"""The validator: does a program obey TensorIR's rules? (docs/design.md section 6)

    problems = tir.analysis.verify(func, target=None)   # [Violation, ...]; empty when valid
    tir.analysis.verify_or_raise(func, "cuda -arch=sm_80")  # raises VerificationError

Each ``Violation`` names its rule (a stable string), what broke it (``"block 'C'"``,
``"loop tx (threadIdx.x)"``, ...), why, and the printed program fragment. The rules, each
defined exactly in the docstring of the module that checks it:

=====================  ==================================================  ====================
rule                   what it checks                                      module
=====================  ==================================================  ====================
``well-formed``        scoping of variables and buffers, unique block      ``well_formed``
                       names, iterator kinds, declared writes
``binding``            bindings quasi-affine, independent, inside their    ``binding``
                       domains; reductions complete and run once,
                       each init before the updates it initializes
``reduction-binding``  reduce loops not parallel / vectorized / thread-    ``binding``
                       bound (except annotated cross-thread reductions)
``region-cover``       what a block reads of an allocated buffer, earlier  ``regions``
                       blocks wrote
``cooperative-access`` shared buffers read in a kernel were written by     ``regions``
                       the kernel's threads together
``thread-binding``     one extent per thread tag per kernel, thread limit  ``gpu``
                       of the target, no threads on a CPU
``shared-memory``      shared memory per kernel within the target's limit ``gpu``
``intrinsic-scope``    warp-level operations run under exactly one warp    ``gpu``
``out-of-bounds``      no unguarded access provably outside its buffer     ``bounds``
                       (``tir.build`` checks this rule too)
=====================  ==================================================  ====================

Without a target, the target-dependent limits are skipped (thread-binding still checks one
extent per tag). The analyses never guess: what they cannot decide (symbolic sizes, regions
they cannot bound) they do not report.

``Schedule(func, debug=True)`` runs ``verify`` after every primitive.
"""

from __future__ import annotations

from tir.analysis.verify._context import Violation, walk
from tir.analysis.verify.binding import CROSS_THREAD_REDUCTION, check_bindings
from tir.analysis.verify.bounds import check_bounds
from tir.analysis.verify.gpu import check_gpu, is_warp_level_op, register_warp_level_op
from tir.analysis.verify.regions import check_regions
from tir.analysis.verify.well_formed import check_well_formed
from tir.ir.function import IRModule, PrimFunc
from tir.target import Target

__all__ = [
    "CROSS_THREAD_REDUCTION",
    "RULES",
    "VerificationError",
    "Violation",
    "is_warp_level_op",
    "register_warp_level_op",
    "check_bounds",
    "verify",
    "verify_or_raise",
]

#: Every rule name a Violation may carry, in the order they are checked.
RULES = (
    "well-formed",
    "binding",
    "reduction-binding",
    "region-cover",
    "cooperative-access",
    "thread-binding",
    "shared-memory",
    "intrinsic-scope",
    "out-of-bounds",
)


class VerificationError(ValueError):
    """A program broke TensorIR's rules; ``violations`` lists every problem found."""

    def __init__(self, func_name: str, violations: list[Violation]) -> None:
        self.violations = violations
        listed = "\n".join(str(v) for v in violations)
        super().__init__(f"function {func_name!r} fails validation ({len(violations)} problem(s)):\n{listed}")


def verify(func: PrimFunc | IRModule, target: Target | str | None = None, staged: bool = False) -> list[Violation]:
    """Every rule violation in ``func`` (each function of a module), empty when it is valid.

    ``staged``: ``func`` is a state a schedule passes through (what ``Schedule(debug=True)``
    checks after every step), not a program about to be built: a shared-scope buffer that a
    kernel reads may still be written before the kernel, outside it (``cache_read(..., "shared")``
    puts its copy at the top level; a later ``compute_at`` moves it in), and then ``region-cover``
    judges the read as it judges any buffer's. ``cooperative-access`` (shared memory does not
    outlive a kernel) holds a program to be built."""
    if isinstance(func, IRModule):
        found: list[Violation] = []
        for one in func.functions.values():
            found.extend(verify(one, target, staged))
        return found
    if not isinstance(func, PrimFunc):
        raise TypeError(f"verify needs a PrimFunc or an IRModule, got {type(func).__name__}")
    resolved = Target.parse(target) if target is not None else None
    program = walk(func)
    violations = check_well_formed(program)
    violations += check_bindings(program)
    violations += check_regions(program, staged)
    violations += check_gpu(program, resolved)
    violations += check_bounds(func)
    order = {rule: k for k, rule in enumerate(RULES)}
    violations.sort(key=lambda v: order.get(v.rule, len(order)))
    return violations


def verify_or_raise(func: PrimFunc | IRModule, target: Target | str | None = None) -> None:
    """Raise ``VerificationError`` listing the violations when ``func`` breaks a rule."""
    violations = verify(func, target)
    if violations:
        name = func.name if isinstance(func, PrimFunc) else ", ".join(func.functions)
        raise VerificationError(name, violations)
