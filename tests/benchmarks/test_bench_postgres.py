"""Smoke test of the PostgreSQL benchmarks (``--store postgres`` and bench_pg_scaling.py) at tiny sizes.

Each run starts its own throwaway cluster (or uses ``$AIDEN_TEST_PG_DSN``), as
the real benchmarks do. No timing thresholds: only that every figure exists,
is well formed and counts what it says. Without PostgreSQL the tests skip
with the reason, except under ``CI``, where they fail, like tests/postgres.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from aiden.testing.pgcluster import TEST_DSN_ENV, PgUnavailable, find_bindir

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_append  # noqa: E402
import bench_compaction  # noqa: E402
import bench_pg_scaling  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL benchmark smoke tests must run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@pytest.fixture(autouse=True)
def postgres_available() -> None:
    """Skip (fail under CI) when there is no psycopg, no server named, and no binaries to start one."""
    try:
        import psycopg  # noqa: F401 - the store needs it
    except ImportError as exc:
        _unavailable(f"psycopg is not installed ({exc}): pip install 'aiden-memory[postgres]'")
    if not os.environ.get(TEST_DSN_ENV) and find_bindir() is None:
        _unavailable("PostgreSQL binaries not found (no pg_config, no /usr/lib/postgresql/*/bin)")


def _bench(fn: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``fn(*args, **kwargs)``; a server that could not be started skips (fails under CI) with the reason."""
    try:
        return fn(*args, **kwargs)
    except PgUnavailable as exc:
        _unavailable(str(exc))


def _owned() -> bool:
    """True when the benchmark starts its own cluster (then fsync=on and the server's CPU is measured)."""
    return not os.environ.get(TEST_DSN_ENV)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _check_table(text: str, rows: int) -> None:
    lines = text.strip().splitlines()
    assert lines[0].startswith("| ") and set(lines[1]) <= {"|", "-"}
    assert len(lines) == rows + 2
    width = lines[0].count("|")
    assert all(line.count("|") == width for line in lines)


def _check_latency(lat: dict[str, float]) -> None:
    assert lat["samples"] > 0
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]


def test_append_postgres_smoke() -> None:
    res = _bench(bench_append.run_postgres, True, levels=(1, 8), repeats=1, seconds=0.2)
    assert res["server"].startswith("PostgreSQL 1")
    if _owned():
        assert "fsync=on" in res["server"]
    assert set(res["levels"]) == {"1", "8"}
    if _owned():
        # The server's CPU is read: /proc counts it in 10 ms ticks, so one 0.2 s level on a
        # loaded machine may read 0, both levels together not.
        assert sum(entry["aiden_pg"]["server_cpu_us_per_event"] for entry in res["levels"].values()) > 0
    for level, entry in res["levels"].items():
        for system in bench_append.PG_SYSTEMS:
            e = entry[system]
            assert e["events"] > 0 and _finite(e["eps"]["median"])
            _check_latency(e["latency_ms"])
            assert _finite(e["cpu_us_per_event"]) and e["cpu_us_per_event"] > 0
        pg = entry["aiden_pg"]
        if level == "1":
            # One appender: every append is its own transaction, so the counter counts appends.
            assert pg["events_per_commit"] == 1.0
        else:
            assert 1.0 <= pg["events_per_commit"] <= 8.0
        assert _finite(pg["server_cpu_us_per_event"]) and pg["server_cpu_us_per_event"] >= 0
        assert entry["aiden_fsync"]["server_cpu_us_per_event"] == 0.0
        ratio = entry["ratio_pg_vs_file"]
        assert (
            ratio["n"] == 1 and ratio["median"] == pg["eps"]["median"] / entry["aiden_fsync"]["eps"]["median"]
        )
    _check_table(res["table"], 2)
    json.dumps(res)


def test_compaction_postgres_smoke() -> None:
    res = _bench(
        bench_compaction.run_postgres,
        True,
        # 0.15 s windows: the compactor starts its first 0.1 s pass at once, so every loaded run
        # has one in flight (1 per store in 2 probe runs; 0.4 s windows only added samples);
        # 100 and 200 events of history are 2 and 3 chunks, as 200 and 400 were 3 and 5.
        seconds=0.15,
        delay=0.1,
        repeats=1,
        sizes=(100, 200),
        appenders=4,
        comp_repeats=1,
    )
    assert set(res["during_compaction"]) == {"file", "postgres"}
    for d in res["during_compaction"].values():
        _check_latency(d["no_compaction_ms"])
        _check_latency(d["during_compaction_ms"])
        assert d["compactions"] >= 1
        assert _finite(d["ratio_p99_pooled"])
    assert _finite(res["ratio_p99_pg_vs_file_during_compaction"])
    hist = res["compaction_vs_history"]
    assert set(hist) == {"file/100", "file/200", "postgres/100", "postgres/200"}
    for key, h in hist.items():
        assert h["history_chunks"] >= 1 and h["history_events"] >= int(key.split("/")[1])
        assert h["compaction_wall_s"]["median"] > 0
        assert ("ratio_wall_vs_file" in h) == key.startswith("postgres/")
    # The file store's histories and PostgreSQL's are built by the same code: same events, same chunks.
    for n in ("100", "200"):
        assert hist[f"file/{n}"]["history_events"] == hist[f"postgres/{n}"]["history_events"]
        assert hist[f"file/{n}"]["history_chunks"] == hist[f"postgres/{n}"]["history_chunks"]
    _check_table(res["table_during"], 4)
    _check_table(res["table_history"], 4)
    json.dumps(res)


def test_pg_scaling_smoke() -> None:
    res = _bench(bench_pg_scaling.run, True, sessions=(1,), workers=(1, 2), tasks=2, repeats=1, seconds=0.3)
    cells = res["cells"]
    assert set(cells) == {
        "file/independent/N1/M1",
        "postgres/independent/N1/M1",
        "file/independent/N1/M2",
        "postgres/independent/N1/M2",
        "postgres/shared/N1/M2",
    }
    for key, c in cells.items():
        assert c["eps"]["median"] > 0
        _check_latency(c["latency_ms"])
        assert c["worker_cpu_per_s"]["median"] > 0
        assert ("ratio_vs_file" in c) == key.startswith("postgres/independent/")
        if key.endswith("/M1"):
            assert c["speedup_vs_1_worker"]["median"] == 1.0
        if key.startswith("postgres/") and _owned():
            assert c["server_cpu_per_s"]["median"] > 0
    assert res["tasks_per_session_per_worker"] == 2
    _check_table(res["table"], 5)
    json.dumps(res)


def test_server_cpu_reads_this_process() -> None:
    """The /proc reader behind the server's CPU figure, pointed at this process: it grows as we burn CPU."""
    read = bench_pg_scaling._server_cpu(os.getpid())
    before = read()
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    after = read()
    assert after - before >= 0.1
