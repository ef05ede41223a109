"""Tuning throughput on dask.distributed: where the client becomes the bottleneck.

1. Measured: the same tune (a 256^3 float32 matmul, XGBoost cost model, evolutionary search,
   batches of 32, candidates at 1 thread) with the local pool and with a LocalCluster of 2
   measuring worker processes (``metasched.tune(..., executor=client)``); candidates per minute,
   and the wall time split into client (search, cost model, database) and measurement.
2. Simulated: 8 / 32 / 128 workers. The client is the real one (``metasched.tune``: search, cost
   model, database, the programs pickled as for dask); the measurement is a stand-in that sleeps
   for what that many workers would take: the batch dealt in chunks as ``DaskExecutor`` deals
   them (one per worker), each candidate costing the machine-seconds one candidate took with the
   local pool in part 1 (its build and runs), plus the dask round trip measured on the cluster.
   Seconds reported per candidate are made up (from the program's structural hash), so the
   search sees a plausible spread.

The tuner is synchronous: the client searches a batch, the workers measure it, the client
learns from it. Per batch, wall = client + measure, with measure = ceil(batch / workers) x
seconds per candidate: adding workers shrinks only the second term, and a batch has no more
chunks than candidates. The report says at which worker count the client's share passes half
of the wall time, and what the client spends it on.

Run: python benchmarks/distributed_tune.py [--trials 64] [--sim-trials 64] [--workers 8 32 128]
(needs: pip install -e '.[bench,dask]'; a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import tempfile
import time
from typing import Any

from _harness import report

import metasched
import tir.script as T
from metasched.measure import Measurer, MeasureResult
from metasched.measure.builder import encode_program
from tir.ir.structural import structural_hash


@T.script
def matmul(A: T.Buffer((256, 256), "float32"), B: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 256), "float32")):
    for i, j, k in T.grid(256, 256, 256):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


class TimedMeasurer:
    """A measurer that keeps the wall seconds spent measuring (the rest of a tune is the client's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.batches: list[tuple[int, float]] = []  # (candidates, seconds)

    def measure(self, inputs: Any, best_seconds: float | None = None) -> list[MeasureResult]:
        start = time.perf_counter()
        try:
            return self.inner.measure(inputs, best_seconds=best_seconds)  # type: ignore[no-any-return]
        finally:
            elapsed = time.perf_counter() - start
            self.seconds += elapsed
            self.batches.append((len(inputs), elapsed))

    def close(self) -> None:
        self.inner.close()


class TimedModel:
    """The XGBoost cost model, with the seconds spent training (update) and ranking (predict)."""

    def __init__(self) -> None:
        from metasched.cost import XGBModel

        self.inner = XGBModel(seed=0)
        self.update_seconds = 0.0
        self.predict_seconds = 0.0

    def update(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.update(*args, **kwargs)
        finally:
            self.update_seconds += time.perf_counter() - start

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.predict(*args, **kwargs)
        finally:
            self.predict_seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SimulatedWorkers:
    """``workers`` machines that measure a batch in ``DaskExecutor``'s chunks, each candidate
    taking ``per_candidate`` seconds and each chunk ``round_trip`` more; it sleeps that long."""

    def __init__(self, workers: int, per_candidate: float, round_trip: float) -> None:
        self.workers = workers
        self.per_candidate = per_candidate
        self.round_trip = round_trip

    def measure(self, inputs: Any, best_seconds: float | None = None) -> list[MeasureResult]:
        for item in inputs:  # the client's serialization cost, as for dask
            encode_program(item.func)
        chunks = min(self.workers, len(inputs))
        longest = math.ceil(len(inputs) / chunks)
        time.sleep(longest * self.per_candidate + self.round_trip)
        results = []
        for item in inputs:
            spread = (structural_hash(item.func) % 1000) / 1000.0
            results.append(MeasureResult(seconds=1e-4 * (1.0 + 4.0 * spread), build_seconds=self.per_candidate))
        return results

    def close(self) -> None:
        pass


def _tune(measurer: Any, trials: int, batch_size: int) -> tuple[float, Any, dict[str, float]]:
    """(wall seconds, result, client seconds by part: search, cost model)."""
    model = TimedModel()
    searched: list[float] = []

    def log(line: str) -> None:
        found = re.search(r"\(search ([0-9.]+) s, measure", line)
        if found:
            searched.append(float(found.group(1)))

    start = time.perf_counter()
    result = metasched.tune(
        matmul,
        "llvm",
        trials=trials,
        work_dir=tempfile.mkdtemp(prefix="distributed-tune-"),
        seed=0,
        num_threads=1,
        measurer=measurer,
        cost_model=model,
        batch_size=batch_size,
        log=log,
    )
    # Ranking happens inside the search: counted once, as the cost model's.
    parts = {
        "search": sum(searched) - model.predict_seconds,
        "cost_model": model.update_seconds + model.predict_seconds,
    }
    return time.perf_counter() - start, result, parts


def _row(name: str, trials: int, wall: float, measure: float, parts: dict[str, float]) -> dict[str, Any]:
    client = wall - measure
    other = client - parts["search"] - parts["cost_model"]
    row = {
        "setup": name,
        "trials": trials,
        "wall_s": round(wall, 2),
        "client_s": round(client, 2),
        "measure_s": round(measure, 2),
        "per_minute": round(60.0 * trials / wall, 1),
        "client_share": round(client / wall, 2),
        "client_search_s": round(parts["search"], 2),
        "client_cost_model_s": round(parts["cost_model"], 2),
        "client_other_s": round(other, 2),
    }
    print(
        f"{name:<28} {trials:>5} trials  {wall:7.1f} s  {row['per_minute']:7.1f}/min   "
        f"client {client:6.1f} s ({100 * client / wall:3.0f}%: search {parts['search']:.1f}, "
        f"cost model {parts['cost_model']:.1f}, other {other:.1f})   measure {measure:6.1f} s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=64, help="trials of each measured tune (default 64)")
    parser.add_argument("--sim-trials", type=int, default=64, help="trials per simulated batch size unit (default 64)")
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 32, 128], help="simulated worker counts")
    parser.add_argument("--batch-size", type=int, default=32, help="the tuner's batch (default 32, tune's default)")
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    rows = []
    print("measured (this machine):", flush=True)
    local = TimedMeasurer(Measurer("llvm", num_threads=1))
    wall, result, parts = _tune(local, args.trials, args.batch_size)
    rows.append(_row("local pool", result.trials, wall, local.seconds, parts))
    # Machine-seconds per candidate: the search batches' measurement, per candidate (coverage
    # and the final re-timing are batches of other sizes).
    search = [(n, s) for n, s in local.batches[1:-1] if n > 1] or local.batches
    per_candidate = sum(s for _, s in search) / sum(n for n, _ in search)
    builds = statistics.median(result.build_seconds) if result.build_seconds else 0.0

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, resources={"measure": 1}, dashboard_address=":0"
    )
    client = Client(cluster)
    try:
        client.submit(sum, [1], pure=False).result()
        start = time.perf_counter()
        for _ in range(20):
            client.submit(sum, [1], pure=False).result()
        round_trip = (time.perf_counter() - start) / 20
        on_dask = TimedMeasurer(Measurer("llvm", executor=client, num_threads=1))
        wall, result, parts = _tune(on_dask, args.trials, args.batch_size)
        rows.append(_row("dask LocalCluster, 2 workers", result.trials, wall, on_dask.seconds, parts))
    finally:
        client.close()
        cluster.close()
    print(
        f"one candidate costs a machine {per_candidate:.3f} s (median build {builds:.3f} s); "
        f"a dask round trip {1e3 * round_trip:.1f} ms",
        flush=True,
    )

    print("simulated workers (real client, sleeping measurement):", flush=True)
    simulated = []
    for workers in args.workers:
        for batch in sorted({args.batch_size, max(args.batch_size, workers)}):
            sim = TimedMeasurer(SimulatedWorkers(workers, per_candidate, round_trip))
            trials = max(args.sim_trials, 2 * batch)
            wall, result, parts = _tune(sim, trials, batch)
            row = _row(f"{workers} workers, batch {batch}", result.trials, wall, sim.seconds, parts)
            row.update(workers=workers, batch=batch)
            simulated.append(row)
    rows.extend(simulated)

    bottleneck = next((r for r in simulated if r["client_share"] >= 0.5), None)
    if bottleneck is None:
        verdict = f"the client stays under half of the wall time up to {max(args.workers)} workers"
    else:
        b = bottleneck
        verdict = (
            f"the client is the bottleneck from {b['workers']} workers (batch {b['batch']}): "
            f"{100 * b['client_share']:.0f}% of the wall time is the client's ({b['client_search_s']:.1f} s search, "
            f"{b['client_cost_model_s']:.1f} s cost model, {b['client_other_s']:.1f} s features, database and "
            "the rest) while the workers wait: the tuner searches, measures and learns in turn, so more "
            "workers only shorten the measurement, and a batch has no more chunks than candidates"
        )
    print(verdict, flush=True)
    report(
        {
            "benchmark": "distributed_tune",
            "per_candidate_machine_s": round(per_candidate, 4),
            "median_build_s": round(builds, 4),
            "dask_round_trip_ms": round(1e3 * round_trip, 2),
            "rows": rows,
            "verdict": verdict,
        }
    )


if __name__ == "__main__":
    main()
