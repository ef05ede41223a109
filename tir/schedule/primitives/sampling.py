"""Schedule primitives: sample_perfect_tile, sample_categorical, sample_compute_location.

A sampling primitive draws from the schedule's random generator (``Schedule(seed=...)``), so
the same seed gives the same samples, and records its *decision* in the trace: the tile sizes,
the chosen index, the chosen location. Replaying a trace passes the recorded decision back
(``decision=...``); ``trace.with_decision(position, new)`` changes one, which is how a search
mutates a program. A decision that does not fit (wrong product, index out of range) raises
ScheduleError before anything changes.

Compute locations are handles too: ``sample_compute_location`` always returns a ``LoopRV``,
either a loop of the program or one of two special locations, ``ROOT_LOCATION`` (leave the
block where it is) and ``INLINE_LOCATION`` (inline it); ``apply_compute_location`` acts on any
of them. Keeping the outcome a handle lets a trace that samples a location and applies it
replay with any other decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tir.ir import IntImm, Var
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.primitives._common import block_target, loop_target

#: The loop variable of the special location "leave the block where it is" (decision -1).
ROOT_LOCATION = Var("root")
#: The loop variable of the special location "inline the block" (decision -2).
INLINE_LOCATION = Var("inline")


def is_root_location(location: LoopRV) -> bool:
    return location.loop_var is ROOT_LOCATION


def is_inline_location(location: LoopRV) -> bool:
    return location.loop_var is INLINE_LOCATION


# ===================================================================== perfect tiles


def _prime_factors(n: int) -> dict[int, int]:
    factors: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def count_factorizations(m: int, parts: int) -> int:
    """How many ordered ways ``m`` is a product of ``parts`` positive integers."""
    if parts == 0:
        return 1 if m == 1 else 0
    return math.prod(math.comb(a + parts - 1, parts - 1) for a in _prime_factors(m).values())


def _uniform_factorization(rng: Any, m: int, parts: int) -> list[int]:
    """A uniformly random ordered factorization of ``m`` into ``parts`` factors: each prime's
    exponent is spread over the parts by a uniform stars-and-bars composition, independently."""
    result = [1] * parts
    for prime, exponent in sorted(_prime_factors(m).items()):
        bars = sorted(rng.sample(range(exponent + parts - 1), parts - 1))
        previous = -1
        shares = []
        for bar in bars:
            shares.append(bar - previous - 1)
            previous = bar
        shares.append(exponent + parts - 1 - previous - 1)
        for k, share in enumerate(shares):
            result[k] *= prime**share
    return result


def sample_perfect_tile(rng: Any, extent: int, n: int, max_innermost_factor: int) -> list[int]:
    """``n`` factors of ``extent`` (outermost first) whose product is ``extent`` and whose last
    is at most ``max_innermost_factor``, uniform over all such factorizations."""
    divisors = [d for d in range(1, min(extent, max_innermost_factor) + 1) if extent % d == 0]
    weights = [count_factorizations(extent // d, n - 1) for d in divisors]
    total = sum(weights)
    if total == 0:
        raise ValueError("no factorization")
    pick = rng.randrange(total)
    innermost = divisors[-1]
    for divisor, weight in zip(divisors, weights):
        if pick < weight:
            innermost = divisor
            break
        pick -= weight
    return [*_uniform_factorization(rng, extent // innermost, n - 1), innermost]


# ===================================================================== Schedule methods


class SamplingPrimitives:
    """Schedule methods for sample_perfect_tile, sample_categorical, sample_compute_location
    (and apply_compute_location, which acts on a sampled location)."""

    def sample_perfect_tile(  # type: ignore[misc]
        self, loop: LoopRV, n: int, max_innermost_factor: int = 16, decision: Sequence[int] | None = None
    ) -> list[ExprRV]:
        """Sample ``n`` tile sizes for ``loop``: positive integers whose product is the loop's
        (constant) extent, the innermost at most ``max_innermost_factor``, uniformly among all
        such factorizations. ``decision`` (the sizes) replays a choice; it is checked.

        Typically followed by ``split``::

            i, j, k = sch.get_loops(sch.get_block("C"))
            sizes = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8)   # e.g. [2, 4, 2]
            i0, i1, i2 = sch.split(i, sizes)

        Before::

            for i, j, k in T.grid(16, 16, 16):
                with T.block("C"):
                    ...

        After (with the sample ``[2, 4, 2]``)::

            for i_0, i_1, i_2, j, k in T.grid(2, 4, 2, 16, 16):
                with T.block("C"):
                    vi = T.spatial_axis(16, i_0 * 8 + i_1 * 2 + i_2)
                    ...

        A loop of symbolic extent gets ``[-1, 1, ..., 1]`` (as TVM): ``split`` reads the sampled
        -1 as the inferred factor, so the outer loop keeps the whole extent.

        Refused: ``n < 1`` or ``max_innermost_factor < 1``;
        no factorization fits (``n == 1`` and the extent is above ``max_innermost_factor``); a
        decision that is not ``n`` positive integers with the extent as product and the last
        at most ``max_innermost_factor``.
        """
        primitive = "sample_perfect_tile"
        node = self.resolve_loop(loop, primitive)  # type: ignore[attr-defined]
        target = loop_target(node)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ScheduleError(primitive, target, f"n must be a positive integer, got {n!r}")
        if not isinstance(node.extent, IntImm):
            # A symbolic extent has no factorization to sample: as TVM, the outermost size is
            # -1 (split infers it: the whole extent) and the others 1.
            sizes = [-1] + [1] * (n - 1)
            if decision is not None and list(decision) != sizes:
                raise ScheduleError(
                    primitive, target, f"the loop has the symbolic extent {node.extent}; the decision must be {sizes}"
                )
            outputs = [self.expr_rv(size) for size in sizes]  # type: ignore[attr-defined]
            self._record(  # type: ignore[attr-defined]
                primitive,
                (loop,),
                {"n": n, "max_innermost_factor": max_innermost_factor},
                outputs,
                decision=list(sizes),
            )
            return outputs
        extent = node.extent.value
        if isinstance(max_innermost_factor, bool) or not isinstance(max_innermost_factor, int):
            raise ScheduleError(
                primitive, target, f"max_innermost_factor must be an integer, got {max_innermost_factor!r}"
            )
        if max_innermost_factor < 1:
            raise ScheduleError(
                primitive, target, f"max_innermost_factor must be at least 1, got {max_innermost_factor}"
            )
        if decision is not None:
            sizes = _check_tile_decision(primitive, target, decision, extent, n, max_innermost_factor)
        else:
            if n == 1 and extent > max_innermost_factor:
                raise ScheduleError(
                    primitive,
                    target,
                    f"no factorization into 1 factor has its innermost at most {max_innermost_factor} "
                    f"(the extent is {extent})",
                )
            sizes = sample_perfect_tile(self.rng, extent, n, max_innermost_factor)  # type: ignore[attr-defined]
        outputs = [self.expr_rv(size) for size in sizes]  # type: ignore[attr-defined]
        self._record(  # type: ignore[attr-defined]
            primitive,
            (loop,),
            {"n": n, "max_innermost_factor": max_innermost_factor},
            outputs,
            decision=list(sizes),
        )
        return outputs

    def sample_categorical(  # type: ignore[misc]
        self, candidates: Sequence[int], probs: Sequence[float], decision: int | None = None
    ) -> ExprRV:
        """Sample one of ``candidates`` (integers) with the given probabilities (non-negative
        weights, not all zero; they need not sum to 1). The decision is the chosen index.

        For example, an unroll depth::

            depth = sch.sample_categorical([0, 16, 64], [0.5, 0.25, 0.25])   # e.g. 16
            sch.annotate(block, "pragma_auto_unroll_max_step", depth)

        Refused: no candidates; as many probabilities as candidates is required; a negative,
        non-finite or all-zero weight; a non-integer candidate; a decision that is not an
        index into ``candidates``.
        """
        primitive = "sample_categorical"
        target = "candidates"
        candidates = list(candidates)
        probs = list(probs)
        if not candidates:
            raise ScheduleError(primitive, target, "needs at least one candidate")
        if any(isinstance(c, bool) or not isinstance(c, int) for c in candidates):
            raise ScheduleError(primitive, target, f"candidates must be integers, got {candidates}")
        if len(probs) != len(candidates):
            raise ScheduleError(
                primitive, target, f"{len(candidates)} candidates but {len(probs)} probabilities: {probs}"
            )
        if (
            any(isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0 for p in probs)
            or sum(probs) <= 0
        ):
            raise ScheduleError(
                primitive, target, f"probabilities must be finite, non-negative and not all zero, got {probs}"
            )
        if decision is not None:
            if isinstance(decision, bool) or not isinstance(decision, int) or not 0 <= decision < len(candidates):
                raise ScheduleError(
                    primitive, target, f"the decision must be an index in [0, {len(candidates)}), got {decision!r}"
                )
            index = decision
        else:
            index = self.rng.choices(range(len(candidates)), weights=probs)[0]  # type: ignore[attr-defined]
        output = self.expr_rv(candidates[index])  # type: ignore[attr-defined]
        self._record(primitive, (candidates, probs), {}, output, decision=index)  # type: ignore[attr-defined]
        return output

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:  # type: ignore[misc]
        """Sample where to compute ``block``: a loop where ``compute_at`` accepts it, "leave it
        where it is", or "inline it" (when ``compute_inline`` accepts it), uniformly among them.

        A decision ``k >= 0`` names the ``k``-th loop of the block's scope in program order (every
        loop, not only the accepted ones, so a decision means the same loop whatever the checks
        say); ``-1`` leaves the block in place (the result is the special handle whose
        ``loop_var`` is ``ROOT_LOCATION``) and ``-2`` inlines it (``INLINE_LOCATION``). The result
        is always a ``LoopRV``, so the trace can pass it on; ``apply_compute_location`` acts on
        it::

            loc = sch.sample_compute_location(sch.get_block("B"))
            sch.apply_compute_location(sch.get_block("B"), loc)

        Sampling draws the choices in a random order and takes the first one the checks accept
        (the same uniform choice as checking them all, at the cost of a few checks: the tuner
        samples this for every candidate).

        Before (B has loops ``i, j``, its consumer C loops ``i, j``: scope loops 0 to 3)::

            for i, j in T.grid(16, 16):
                with T.block("B"):
                    ...
            for i, j in T.grid(16, 16):
                with T.block("C"):
                    ...  B[vi, vj] ...

        After applying the decision ``2`` (C's ``i``): B computed at C's ``i``, as
        ``compute_at`` does it.

        Refused: a decision that is not an integer or not a loop position, ``-1`` or ``-2``; a
        loop where ``compute_at`` refuses the block (its reason is given); ``-2`` when the block
        cannot be inlined.
        """
        primitive = "sample_compute_location"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        name = realize.block.name
        loops = _scope_loops(self, realize)
        choices = list(range(len(loops))) + [-1, -2]
        if decision is not None:
            if isinstance(decision, bool) or not isinstance(decision, int) or decision not in choices:
                raise ScheduleError(
                    primitive,
                    block_target(realize),
                    f"the decision must be a loop position in [0, {len(loops)}) of the block's scope, "
                    f"-1 (leave in place) or -2 (inline); got {decision!r}",
                )
            reason = _location_refusal(self, name, loops, decision)
            if reason is not None:
                raise ScheduleError(primitive, block_target(realize), f"the decision {decision} is refused: {reason}")
            chosen = decision
        else:
            order = list(choices)
            self.rng.shuffle(order)  # type: ignore[attr-defined]
            chosen = next(c for c in order if _location_refusal(self, name, loops, c) is None)
        if chosen == -1:
            var = ROOT_LOCATION
        elif chosen == -2:
            var = INLINE_LOCATION
        else:
            var = loops[chosen]
        output = self.loop_rv(var)  # type: ignore[attr-defined]
        self._record(primitive, (block,), {}, output, decision=chosen)  # type: ignore[attr-defined]
        return output

    def apply_compute_location(self, block: BlockRV, location: LoopRV) -> None:  # type: ignore[misc]
        """Move ``block`` to a location from ``sample_compute_location``: ``compute_at`` for a
        loop, ``compute_inline`` for the inline location, nothing for the root location.

        Refused: whatever ``compute_at`` / ``compute_inline`` refuse (their errors are passed on);
        a location that is not a ``LoopRV``.
        """
        primitive = "apply_compute_location"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        name = realize.block.name
        if not isinstance(location, LoopRV):
            raise ScheduleError(primitive, repr(location), "expected a location handle (LoopRV)")
        if is_inline_location(location):
            from tir.schedule.primitives.inline import compute_inline

            self._set_func(compute_inline(self.func, name), primitive)  # type: ignore[attr-defined]
        elif not is_root_location(location):
            from tir.schedule.primitives.compute_location import compute_at

            loop = self.resolve_loop(location, primitive)  # type: ignore[attr-defined]
            self._set_func(compute_at(self.func, name, loop.loop_var), primitive)  # type: ignore[attr-defined]
        self._record(primitive, (block, location), {}, ())  # type: ignore[attr-defined]


def _check_tile_decision(
    primitive: str, target: str, decision: Sequence[int], extent: int, n: int, max_innermost_factor: int
) -> list[int]:
    sizes = list(decision) if isinstance(decision, (list, tuple)) else None
    if sizes is None or any(isinstance(s, bool) or not isinstance(s, int) for s in sizes):
        raise ScheduleError(primitive, target, f"the decision must be a list of integers, got {decision!r}")
    if len(sizes) != n:
        raise ScheduleError(primitive, target, f"the decision {sizes} has {len(sizes)} factors, n is {n}")
    if any(s < 1 for s in sizes):
        raise ScheduleError(primitive, target, f"the decision {sizes} has a factor below 1")
    if math.prod(sizes) != extent:
        raise ScheduleError(
            primitive, target, f"the decision {sizes} multiplies to {math.prod(sizes)}, the loop extent is {extent}"
        )
    if sizes[-1] > max_innermost_factor:
        raise ScheduleError(
            primitive,
            target,
            f"the decision {sizes} has the innermost factor {sizes[-1]} above max_innermost_factor "
            f"{max_innermost_factor}",
        )
    return sizes


def _scope_loops(sch: Any, realize: Any) -> list[Var]:
    """The loop variables of the block's scope (not inside nested blocks), in program order."""
    from tir.schedule.primitives.compute_location import scope_loops

    return scope_loops(sch.func, realize.block.name, sch.index)


def _location_refusal(sch: Any, block_name: str, loops: list[Var], choice: int) -> str | None:
    """Why the location ``choice`` (a scope loop position, -1 or -2) is refused, or None."""
    if choice == -1:
        return None
    try:
        if choice == -2:
            from tir.schedule.primitives.inline import compute_inline

            compute_inline(sch.func, block_name)
        else:
            from tir.schedule.primitives.compute_location import check_compute_at

            check_compute_at(sch.func, block_name, loops[choice], index=sch.index)
    except ScheduleError as error:
        return f"{error.primitive}: {error.target}: {error.rule}"
    return None


__all__ = [
    "INLINE_LOCATION",
    "ROOT_LOCATION",
    "SamplingPrimitives",
    "count_factorizations",
    "is_inline_location",
    "is_root_location",
    "sample_perfect_tile",
]
