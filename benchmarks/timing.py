"""The timers, the report line and the Spark session the benchmark scripts share."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs, in seconds: the least disturbed by other load."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_in_turns(candidates: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The fastest run of each candidate, running them in turns (a, b, c, a, b, c, ...) so that
    a burst of load on a shared machine hits every candidate rather than one."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(ts) for name, ts in times.items()}


def runs_in_turns(
    candidates: dict[str, Callable[[], object]], repeat: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Every run of each candidate, in turns as :func:`best_in_turns` runs them: per candidate
    its wall-clock times and its CPU times (this process's, all threads), in seconds. On a
    shared machine the CPU times are the less disturbed: other load stretches the wall clock
    of a run more than the CPU it uses. Before each run the cyclic GC collects, untimed: the
    objects one candidate's run left behind are not collected (and paid for) during the
    next candidate's run, which in turns would charge each for the other's garbage."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            gc.collect()
            cpu = time.process_time()
            start = time.perf_counter()
            fn()
            times[name][0].append(time.perf_counter() - start)
            times[name][1].append(time.process_time() - cpu)
    return times


def report(name: str, ratio: float, target: str | None = None, ok: bool = True) -> bool:
    """One ratio, with its target and verdict when it has one; returns ``ok``."""
    verdict = "" if target is None else f"target {target:<8} {'ok' if ok else 'MISSED'}"
    print(f"  {name:<62} {ratio:8.2f}x   {verdict}", flush=True)
    return ok


def local_spark(conf: dict[str, str] | None = None, jars: bool = False) -> Any:
    """The Spark session the Spark benchmarks run in: local[2], no UI, UTC, a 4 GiB driver,
    quiet logs; ``conf``: more settings; ``jars``: with parquet-bloom's JVM accelerator."""
    from pyspark.sql import SparkSession

    from parquet_bloom.spark import jar_path

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
    )
    if jars:
        builder = builder.config("spark.jars", str(jar_path()))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
