"""Tuning on dask.distributed: a LocalCluster of two worker processes measures like the local
pool, survives a worker killed mid-batch, refuses a target no worker serves, and routes
candidates to the workers whose machine matches their target; a plain LocalCluster (no worker
declares the measure resource) measures one chunk at a time per machine."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

distributed = pytest.importorskip("distributed")

import metasched  # noqa: E402
import tir  # noqa: E402
from metasched.database import Database  # noqa: E402
from metasched.measure import MeasureInput, Measurer  # noqa: E402
from metasched.measure.dask_executor import (  # noqa: E402
    DaskExecutor,
    NoWorkerError,
    SchedulerLostError,
    WorkerMachine,
    describe_measuring,
    measuring_groups,
    serves,
)
from tests.metasched.test_tune import matmul  # noqa: E402
from tir.runtime.aarch64 import toolchain_missing_reason  # noqa: E402
from tir.target import Target  # noqa: E402


def _quiet(line: str) -> None:
    pass


def _cluster(measure: bool = True, **resources: float) -> tuple[object, object]:
    """Two worker processes, declaring the measure resource (or, ``measure=False``, none)."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        resources={**({"measure": 1} if measure else {}), **resources},
        dashboard_address=":0",
        silence_logs=50,
    )
    return cluster, distributed.Client(cluster)


@pytest.fixture(scope="module")
def client():  # noqa: ANN201 - two measuring worker processes, started once for this module
    cluster, client = _cluster()
    yield client
    client.close()
    cluster.close()


def _tune(work_dir: object, **options: object) -> metasched.TuneResult:
    return metasched.tune(
        matmul,
        "llvm",
        trials=12,
        work_dir=str(work_dir),
        seed=3,
        num_threads=1,
        cost_model="random",
        strategy="replay",
        batch_size=6,
        **{"log": _quiet, **options},
    )


def test_a_tune_through_dask_finds_the_same_best_candidate_as_the_local_pool(client, tmp_path) -> None:  # noqa: ANN001
    on_dask = _tune(tmp_path / "dask", executor=client)
    local = _tune(tmp_path / "local")
    # The client side (search, cost model) saw the same candidates in the same order ...
    traces = [[r.trace_json for r in Database(tmp_path / name).records()] for name in ("dask", "local")]
    assert traces[0][:12] == traces[1][:12]
    # ... measured correctly on the workers.
    assert on_dask.trials == local.trials == 12
    assert not on_dask.tasks[0].errors, on_dask.tasks[0].errors
    assert on_dask.tasks[0].best_trace is not None
    # The same one came out best -- or, where two candidates time within noise of each other,
    # one that the local pool also timed within 25% of its best.
    local_times = {r.trace_json: r.seconds for r in Database(tmp_path / "local").records() if r.is_valid}
    dask_best = on_dask.tasks[0].best_trace.to_json()
    assert dask_best in local_times
    assert local_times[dask_best] <= 1.25 * min(local_times.values()), (local_times[dask_best], local_times)


def test_a_program_measured_again_on_a_worker_comes_from_its_build_cache(client) -> None:  # noqa: ANN001
    schedule = tir.Schedule(matmul)
    schedule.parallel(schedule.get_loops(schedule.get_block("C"))[0])
    measurer = Measurer("llvm", executor=client, num_threads=1, repeat=1)
    first, again = (measurer.measure([MeasureInput(schedule.func, "llvm", reference=matmul)])[0] for _ in range(2))
    assert first.error_kind is None and again.error_kind is None, (first.error_msg, again.error_msg)
    assert first.build_seconds > 0 and again.build_seconds == 0.0


def test_a_target_no_worker_serves_is_a_clear_error(client, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(NoWorkerError, match=r"aarch64.*does not declare the 'qemu_aarch64' resource"):
        metasched.tune(
            matmul, "llvm -mtriple=aarch64-linux-gnu", trials=2, work_dir=str(tmp_path), executor=client, log=_quiet
        )
    # More threads than any worker's cores: refused by name, with the count.
    cores = len(os.sched_getaffinity(0))
    measurer = Measurer("llvm", executor=client, num_threads=cores + 1)
    with pytest.raises(NoWorkerError, match=rf"has {cores} cores, fewer than the {cores + 1} threads"):
        measurer.measure([MeasureInput(matmul, "llvm")])


@pytest.mark.parametrize("declared", [True, False], ids=["measure-resource", "plain-workers"])
def test_a_worker_killed_mid_batch_loses_nothing_recorded(tmp_path, declared) -> None:  # noqa: ANN001
    # Plain workers: both are on this machine, so the lost chunk is measured again by the other one.
    cluster, client = _cluster(measure=declared)
    try:
        pids = client.run(os.getpid)
        lines: list[str] = []
        executor = DaskExecutor(client, log=lines.append)
        measurer = Measurer("llvm", executor=client, num_threads=1)
        measurer.executor = executor
        killed: list[str] = []

        def kill_when_busy() -> None:
            # Once a chunk of a search batch is being measured on a worker, terminate its process.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                for address, keys in client.processing().items():
                    if keys and address in pids:
                        os.kill(pids[address], signal.SIGKILL)
                        killed.append(address)
                        return
                time.sleep(0.02)

        started: list[threading.Thread] = []

        def on_progress(status: metasched.TuneStatus) -> None:
            if status.phase == "search" and not started:
                started.append(threading.Thread(target=kill_when_busy, daemon=True))
                started[0].start()

        result = metasched.tune(
            matmul,
            "llvm",
            trials=12,
            work_dir=str(tmp_path),
            seed=0,
            measurer=measurer,
            cost_model="random",
            strategy="replay",
            batch_size=6,
            log=_quiet,
            on_progress=on_progress,
        )
        started[0].join()
        assert killed, "no chunk was seen running on a worker"
        assert result.trials == 12
        # Every candidate was measured (the lost chunk again, elsewhere), none recorded as failed.
        records = Database(tmp_path).records(matmul, "llvm")
        assert len(records) >= 12 and all(r.is_valid for r in records), [r.error_msg for r in records if not r.is_valid]
        assert executor.lost_workers == killed
        assert any(f"dask worker {killed[0]} was lost" in line and "measured again" in line for line in lines), lines
    finally:
        client.close()
        cluster.close()


def test_a_scheduler_that_goes_away_stops_the_run_with_the_database_intact(tmp_path) -> None:  # noqa: ANN001
    cluster, client = _cluster()
    try:
        measurer = Measurer("llvm", executor=client, num_threads=1)
        measurer.executor.grace = 2.0  # type: ignore[union-attr]

        def on_progress(status: metasched.TuneStatus) -> None:
            if status.phase == "search" and status.trials >= 6:
                cluster.close()  # scheduler and workers gone after the first batch is recorded

        with pytest.raises(SchedulerLostError, match="went away.*every finished measurement is in its database"):
            metasched.tune(
                matmul,
                "llvm",
                trials=24,
                work_dir=str(tmp_path),
                seed=0,
                measurer=measurer,
                cost_model="random",
                strategy="replay",
                batch_size=6,
                log=_quiet,
                on_progress=on_progress,
            )
        records = Database(tmp_path).records(matmul, "llvm")
        assert len(records) >= 6 and all(r.is_valid for r in records)
    finally:
        client.close()
        cluster.close()


def _machine(triple: str = "x86_64-unknown-linux-gnu", **fields: object) -> WorkerMachine:
    host = Target.host()
    values: dict = {
        "address": "tcp://10.0.0.1:1234",
        "triple": triple,
        "cpu": host.cpu,
        "features": host.features,
        "cores": 64,
        "resources": {"measure": 1},
        "aarch64_tools": False,
    }
    values.update(fields)
    return WorkerMachine(**values)


@pytest.mark.skipif(Target.host().isa != "x86_64", reason="the machines below are x86-64 ones")
def test_a_candidate_goes_only_to_workers_whose_machine_matches_its_target() -> None:
    same = _machine()
    assert serves(same, "llvm", 2) == (None, False)
    assert "fewer than the 128 threads" in str(serves(same, "llvm", 128)[0])
    # The measure resource decides which workers measure (measuring_groups), not which serve a target.
    assert serves(_machine(resources={}), "llvm", 2) == (None, False)
    # The client's own machine ("llvm"): the same CPU and features, not merely more of them.
    other = _machine(cpu="sapphirerapids", features=Target.host().features | {"amx-int8"})
    assert "not the client's" in str(serves(other, "llvm", 2)[0])
    # An explicit target: every feature it names.
    v3 = Target.parse("llvm -mcpu=x86-64-v3").features
    assert serves(_machine(cpu="other", features=v3 | {"avx512f"}), "llvm -mcpu=x86-64-v3", 2) == (None, False)
    lacking = _machine(features=frozenset({"sse", "sse2"}))
    assert "lacks CPU feature(s)" in str(serves(lacking, "llvm -mcpu=x86-64-v3", 2)[0])
    # AArch64: an AArch64 worker natively; an x86-64 one only with a declared qemu runner and its tools.
    aarch64 = "llvm -mtriple=aarch64-linux-gnu"
    arm = _machine("aarch64-unknown-linux-gnu", cpu="neoverse-n1", features=frozenset({"neon", "dotprod"}))
    assert serves(arm, aarch64, 2) == (None, False)
    assert "is aarch64-unknown-linux-gnu, the target is x86_64" in str(serves(arm, "llvm -mcpu=x86-64-v3", 2)[0])
    assert "does not declare the 'qemu_aarch64' resource" in str(serves(same, aarch64, 2)[0])
    declared = _machine(resources={"measure": 1, "qemu_aarch64": 1})
    assert "lacks qemu-aarch64" in str(serves(declared, aarch64, 2)[0])
    assert serves(_machine(resources={"measure": 1, "qemu_aarch64": 1}, aarch64_tools=True), aarch64, 2) == (None, True)


@pytest.mark.aarch64
@pytest.mark.skipif(toolchain_missing_reason() is not None, reason=str(toolchain_missing_reason()))
def test_an_aarch64_candidate_is_measured_on_a_qemu_worker_and_marked_emulated() -> None:
    cluster, client = _cluster(qemu_aarch64=1)
    try:
        target = "llvm -mtriple=aarch64-linux-gnu"
        measurer = Measurer(target, executor=client, num_threads=1, repeat=1)
        schedule = tir.Schedule(matmul)
        result = measurer.measure([MeasureInput(schedule.func, target, reference=matmul)])[0]
        assert result.error_kind is None and result.seconds, result.error_msg
        assert result.emulated
    finally:
        client.close()
        cluster.close()


def test_a_plain_local_cluster_tunes_one_chunk_at_a_time_per_machine(tmp_path, capfd) -> None:  # noqa: ANN001
    # Any dask cluster: two worker processes that declare no resource, as LocalCluster starts them.
    cluster, client = _cluster(measure=False)
    try:
        lines: list[str] = []
        with distributed.get_task_stream(client) as stream:
            result = _tune(tmp_path, executor=client, log=lines.append)
        assert result.trials == 12
        assert not result.tasks[0].errors, result.tasks[0].errors
        assert result.best_func is not None and result.tasks[0].best_seconds
        records = Database(tmp_path).records(matmul, "llvm")
        assert len(records) >= 12 and all(r.is_valid for r in records), [r.error_msg for r in records]
        # Both workers are on this machine: they measure one chunk at a time, never two at once.
        chunks = sorted(
            (part["start"], part["stop"])
            for task in stream.data
            if "measure_chunk" in str(task["key"])
            for part in task["startstops"]
            if part["action"] == "compute"
        )
        assert chunks
        assert all(stop <= start for (_, stop), (start, _) in zip(chunks, chunks[1:])), chunks
        # Said in the log (the executor's own, stderr by default, or the tune's).
        told = capfd.readouterr().err + "\n".join(lines)
        assert (
            "measuring on 1 machine (dask workers grouped by host: 2 workers on 127.0.0.1; "
            "none declares the 'measure' resource: one chunk at a time per machine)"
        ) in told, told
    finally:
        client.close()
        cluster.close()


def test_two_targets_in_one_batch_take_turns_on_one_machine() -> None:
    # Two targets make two chunks; with both workers on one machine they run one after the other.
    # Workers of a cluster in this process (threads, several each) measure as well.
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0", silence_logs=50
    )
    client = distributed.Client(cluster)
    try:
        lines: list[str] = []
        measurer = Measurer("llvm", executor=client, num_threads=1, repeat=1)
        measurer.executor.log = lines.append  # type: ignore[union-attr]
        explicit = f"llvm -mcpu={Target.host().cpu}"
        if Target.parse(explicit).features - Target.host().features:
            pytest.skip(f"{explicit!r} names features this machine lacks")
        with distributed.get_task_stream(client) as stream:
            results = measurer.measure([MeasureInput(matmul, "llvm"), MeasureInput(matmul, explicit)])
        assert all(r.error_kind is None and r.seconds for r in results), [r.error_msg for r in results]
        chunks = sorted(
            (part["start"], part["stop"])
            for task in stream.data
            if "measure_chunk" in str(task["key"])
            for part in task["startstops"]
            if part["action"] == "compute"
        )
        assert len(chunks) == 2 and chunks[0][1] <= chunks[1][0], chunks
        assert lines[0].startswith("measuring on 1 machine (dask workers grouped by host: 2 workers on"), lines
    finally:
        client.close()
        cluster.close()


def test_workers_are_grouped_by_machine_unless_some_declare_the_measure_resource() -> None:
    def worker(address: str, machine: str = "", **resources: float) -> WorkerMachine:
        return _machine(address=address, machine=machine, resources=resources)

    # Two workers on one host: one measuring machine, its workers in address order.
    one_host = [worker("tcp://10.0.0.1:4001"), worker("tcp://10.0.0.1:4000")]
    groups = measuring_groups(one_host)
    assert [[w.address for w in g] for g in groups.values()] == [["tcp://10.0.0.1:4000", "tcp://10.0.0.1:4001"]]
    assert describe_measuring(groups).startswith(
        "measuring on 1 machine (dask workers grouped by host: 2 workers on 10.0.0.1; none declares"
    )
    # Two hosts: two machines.
    two_hosts = [worker("tcp://10.0.0.1:4000"), worker("tcp://10.0.0.1:4001"), worker("tcp://10.0.0.2:4000")]
    assert len(measuring_groups(two_hosts)) == 2
    assert describe_measuring(measuring_groups(two_hosts)).startswith(
        "measuring on 2 machines (dask workers grouped by host: 2 workers on 10.0.0.1, 1 worker on 10.0.0.2;"
    )
    # Only the machines with a worker that serves the target are counted.
    assert describe_measuring(measuring_groups(two_hosts), ["tcp://10.0.0.2:4000"]).startswith("measuring on 1 machine")
    # The machine's identity wins over the address: two containers of one host (one kernel) are one machine.
    containers = [worker("tcp://172.17.0.2:4000", "boot:1"), worker("tcp://172.17.0.3:4000", "boot:1")]
    assert len(measuring_groups(containers)) == 1
    assert "2 workers on 172.17.0.2/172.17.0.3" in describe_measuring(measuring_groups(containers))
    assert (
        len(measuring_groups([worker("tcp://10.0.0.1:4000", "boot:1"), worker("tcp://10.0.0.1:4001", "boot:2")])) == 2
    )
    # The option: once some workers declare the resource, they alone measure, each on its own.
    declared = [*one_host, worker("tcp://10.0.0.3:4000", measure=1), worker("tcp://10.0.0.3:4001", measure=1)]
    groups = measuring_groups(declared)
    assert sorted(groups) == ["tcp://10.0.0.3:4000", "tcp://10.0.0.3:4001"]
    assert describe_measuring(groups) == (
        "measuring on 2 dask workers that declare the 'measure' resource (one chunk at a time each)"
    )
