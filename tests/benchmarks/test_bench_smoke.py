"""Smoke test of the benchmark suite: the cheap workloads run with tiny sizes and
produce well-formed results. No timing thresholds: benchmarks are not timed tests
(``nox -s bench`` runs the real thing)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
import bench_append  # noqa: E402
import bench_compaction  # noqa: E402
import bench_footprint  # noqa: E402
import bench_loop_stalls  # noqa: E402
import bench_messages  # noqa: E402
import bench_peer  # noqa: E402
import bench_sessions  # noqa: E402
import run_all  # noqa: E402


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _check_summary(s: dict[str, float]) -> None:
    assert set(s) >= {"median", "min", "max"}
    assert _finite(s["median"]) and s["min"] <= s["median"] <= s["max"]


def _check_table(text: str, rows: int) -> None:
    lines = text.strip().splitlines()
    assert lines[0].startswith("| ") and set(lines[1]) <= {"|", "-"}
    assert len(lines) == rows + 2
    width = lines[0].count("|")
    assert all(line.count("|") == width for line in lines)


def _check_targets(targets: list[dict[str, Any]]) -> None:
    for t in targets:
        assert set(t) >= {"name", "goal", "value", "met", "measured"}
        assert isinstance(t["met"], bool)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder with the tiny runs' JSON, as the real runs write it."""
    d = tmp_path_factory.mktemp("bench-results")
    return d


@pytest.fixture(scope="module")
def append_result(results: Path) -> dict[str, Any]:
    res = bench_append.run(True, levels=(1, 64), repeats=1, seconds=0.05)
    (results / "append.json").write_text(json.dumps({"machine": _common.machine(), **res}))
    return res


def test_append_smoke(append_result: dict[str, Any]) -> None:
    res = append_result
    assert set(res["levels"]) == {"1", "64"}
    for entry in res["levels"].values():
        for system in bench_append.SYSTEMS:
            _check_summary(entry[system]["eps"])
            assert entry[system]["events"] > 0
            lat = entry[system]["latency_ms"]
            assert lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        _check_summary(entry["ratio_aiden_vs_group_commit"])
    _check_table(res["table"], 2)
    _check_targets(res["targets"])
    assert len(res["targets"]) == 3  # the three targets at 64 appenders (throughput, CPU, per-event fsync)
    json.dumps(res)


def test_compaction_smoke(results: Path) -> None:
    # 0.15 s windows: the compactor starts its first 0.1 s pass at once (0.3 s only added
    # samples); 100 and 200 events of history are 2 and 3 chunks, as 200 and 400 were 3 and 5.
    res = bench_compaction.run(
        True, seconds=0.15, delay=0.1, repeats=1, sizes=(100, 200), appenders=4, comp_repeats=1
    )
    d = res["during_compaction"]
    assert d["no_compaction_ms"]["samples"] > 0 and d["during_compaction_ms"]["samples"] > 0
    assert d["compactions"] >= 1
    assert _finite(d["ratio_p99_pooled"])
    hist = res["compaction_vs_history"]
    assert set(hist) == {"100", "200"}
    for h in hist.values():
        assert h["history_chunks"] >= 1
        _check_summary(h["compaction_wall_s"])
        _check_summary(h["open_s"])
    _check_table(res["table_during"], 2)
    _check_table(res["table_history"], 2)
    _check_targets(res["targets"])
    (results / "compaction.json").write_text(json.dumps(res))


def test_messages_smoke(results: Path) -> None:
    res = bench_messages.run(True, repeats=1, n=200, appends=5)
    for key in ("direct", "encode", "decode", "stream_rt", "hop_rt", "append_fsync", "append_none"):
        _check_summary(res["us"][key])
    assert res["message_bytes"] > 0
    assert res["share_of_durable_append"] > 0
    _check_table(res["table"], 8)
    (results / "messages.json").write_text(json.dumps(res))


def test_footprint_smoke(results: Path) -> None:
    res = bench_footprint.run(True, sizes=(400, 800), import_repeats=1, no_usage_events=200)
    for n in ("400", "800"):
        r = res["replay"][n]
        assert r["events"] >= int(n)
        assert r["peak_rss_mb"] > 0 and r["trajectory"]
    assert res["replay_without_usage"]["events"] >= 200
    imp = res["import"]
    _check_summary(imp["import_cost_s"])
    audit = imp["audit"]
    assert "after_import" in audit, audit
    assert audit["compacted"] is True
    _check_targets(res["targets"])
    _check_table(res["table_replay"], 3)
    (results / "footprint.json").write_text(json.dumps(res))


def test_sessions_smoke() -> None:
    import anyio

    res = anyio.run(bench_sessions._sessions, 5, 0.0)
    assert res["sessions"] == 5 and res["fds_left"] == 0
    # The commit threads are shared (at most 4 in all); each open session holds one lock descriptor.
    assert res["threads"] - res["threads_before"] <= 4 and res["fds_per_session"] <= 1.0
    assert res["tasks_per_session"] > 0 and _finite(res["rss_kb_per_session"])
    for key in ("open_ms", "first_append_ms", "close_ms"):
        assert _finite(res[key]["p50"]) and res[key]["p50"] <= res[key]["p99"]


def test_loop_stalls_smoke() -> None:
    import anyio

    from aiden import SessionEvent

    turns = [
        (
            i % 2 == 1,
            SessionEvent(type="assistant_output", role="assistant", content=f"Turn {i}: the export of account {i} is done.")
            if i % 2
            else SessionEvent(type="user_input", content=f"Turn {i}: export account {i} to CSV under 5 MB."),
        )
        for i in range(60)
    ]
    probe = bench_loop_stalls.Probe()
    res = anyio.run(bench_loop_stalls.drive, "tiny", turns, 2000, probe)
    assert res["events"] == 60 and res["compactions"] >= 1
    assert {"idle", "append", "build_messages", "dream", "checkpoint"} <= set(probe.lags)
    assert all(lag >= 0.0 for lags in probe.lags.values() for lag in lags)


def test_peer_helpers_without_nanobot() -> None:
    """The peer benchmark's translation of events (nanobot itself lives in a separate venv, not used here)."""
    events = bench_peer._events("scenario", n_turns=3)
    kinds = {e["type"] for e in events}
    assert {"user_input", "tool_call", "tool_result", "assistant_output"} <= kinds
    for e in events:
        msg = bench_peer._nb_message(e)
        assert msg["role"] in {"user", "assistant", "tool"}
        assert isinstance(bench_peer._event_text(e), str)
        bench_peer._aiden_event(e)  # converts to a valid SessionEvent


def test_summary_and_doc(results: Path, append_result: dict[str, Any], tmp_path: Path) -> None:
    text, summary = run_all.build_summary(results, quick=True)
    assert "### Targets" in text and "1. Concurrent durable appends" in text
    assert summary["targets"] and all("met" in t for t in summary["targets"])
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"# Benchmarks\n\nprose before\n\n{run_all.BEGIN}\nold\n{run_all.END}\n\nprose after\n")
    run_all.write_doc(text, doc)
    out = doc.read_text()
    assert "prose before" in out and "prose after" in out and "old" not in out.split(run_all.BEGIN)[1]
    assert "### Targets" in out


def test_plot(results: Path, append_result: dict[str, Any]) -> None:
    pytest.importorskip("matplotlib")
    import plot

    png = plot.plot(results)
    assert png is not None and png.stat().st_size > 1000
