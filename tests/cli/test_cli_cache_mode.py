"""``metasched tune --cache``: kernels timed cold when the model outgrows the last-level cache,
warm when it stays there (an eviction before every run is what such a model never sees); the
closing comparison's runs."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

pytest.importorskip("onnx")

from metasched.cli import tune as cli_tune  # noqa: E402
from metasched.cli.common import load_model  # noqa: E402
from metasched.measure import runner  # noqa: E402


def _args(cache: str = "auto", warm_cache: bool = False) -> argparse.Namespace:
    return argparse.Namespace(cache=cache, warm_cache=warm_cache)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):  # type: ignore[no-untyped-def]
    return load_model(None, {}, tmp_path_factory.mktemp("demo"))


def test_the_footprint_is_the_weights_and_the_two_largest_values(demo) -> None:  # type: ignore[no-untyped-def]
    graph = demo.graph
    weights = sum(np.asarray(v).nbytes for v in graph.constants.values())
    largest = sorted(int(np.prod(i.shape)) * np.dtype(i.dtype).itemsize for i in graph.infos.values())[-2:]
    assert cli_tune.model_footprint(graph) == weights + sum(largest)
    assert 4 << 20 < cli_tune.model_footprint(graph) < 16 << 20  # SqueezeNet 1.1: 1.2 M weights


def test_auto_is_warm_for_a_model_inside_the_cache_and_cold_beyond_it(demo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(runner, "last_level_cache_bytes", lambda: 256 << 20)
    assert cli_tune._cold_caches(_args(), demo) is False
    monkeypatch.setattr(runner, "last_level_cache_bytes", lambda: 16 << 20)
    assert cli_tune._cold_caches(_args(), demo) is True


def test_an_explicit_choice_wins(demo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(runner, "last_level_cache_bytes", lambda: 256 << 20)
    assert cli_tune._cold_caches(_args("cold"), demo) is True
    monkeypatch.setattr(runner, "last_level_cache_bytes", lambda: 1 << 20)
    assert cli_tune._cold_caches(_args("warm"), demo) is False
    assert cli_tune._cold_caches(_args("auto", warm_cache=True), demo) is False


def test_the_closing_comparison_times_a_small_model_for_about_a_second() -> None:
    import time

    def sleeper(seconds: float):  # type: ignore[no-untyped-def]
        return lambda feeds: time.sleep(seconds)

    assert cli_tune._comparison_runs([lambda feeds: None, lambda feeds: None], {}) == 300  # capped
    assert 50 <= cli_tune._comparison_runs([sleeper(0.01), sleeper(0.01)], {}) <= 100  # ~1 s of runs
    assert cli_tune._comparison_runs([sleeper(0.1), sleeper(0.1)], {}) == 20  # never fewer than 20
