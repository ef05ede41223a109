"""The gradient task scheduler that ``metasched tune`` uses: Ansor's similarity term (a task far
slower per FLOP than a similar task is worth trials even when its own curve is flat)."""

from __future__ import annotations

from metasched.scheduler import Gradient, TaskProgress


def test_a_task_slower_per_flop_than_its_peers_gets_the_next_batch() -> None:
    # Same weight, same latency, same trials: equal without the similarity term.
    slow = TaskProgress(1.0, trials=64, history=[(64, 1e-3)], flops=1e6, group="conv_relu")
    peer = TaskProgress(1.0, trials=64, history=[(64, 1e-3)], flops=1e8, group="conv_relu")
    other = TaskProgress(1.0, trials=64, history=[(64, 1e-3)], flops=1e6, group="dense")
    gradient = Gradient()
    # `peer` does 100x the work in the same time: `slow` could run far faster; `other` has no peer.
    assert gradient.pick([other, peer, slow]) == 2


def test_without_groups_the_scheduler_follows_weight_and_latency() -> None:
    light = TaskProgress(1.0, trials=8, history=[(8, 1e-3)])
    heavy = TaskProgress(3.0, trials=8, history=[(8, 1e-3)])
    assert Gradient().pick([light, heavy]) == 1
