"""The benchmarks on a real-data folder they do not know (``AIDEN_REAL_DATA`` laid out as ../shared/data):
SWE-agent sessions without hand-written questions, a session's own ``.questions.json``, a function-calling
history cut before the final step, and a history-only trajectory. Synthetic folders under ``tmp_path``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.governance.swe_sessions import load_session

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_recall_quality as rq  # noqa: E402

pytestmark = pytest.mark.anyio


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text_run(steps: int) -> dict[str, Any]:
    """A text-action run: the task, then ``steps`` steps with long outputs (``marker-<n>`` in step n's)."""
    return {
        "history": [{"role": "system", "content": "You are an agent."},
                    {"role": "user", "content": "ISSUE:\nThe parser drops the last line of every file"}],
        "trajectory": [{"thought": f"Step {n}: look further.", "action": f"cat part{n}.txt",
                        "observation": f"marker-{n} " + f"line {n} of the output, nothing special here. " * 45}
                       for n in range(steps)],
    }


def _folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, questions: Any = None) -> Path:
    swe = tmp_path / "swe-agent"
    swe.mkdir()
    (swe / "unknown-run.traj").write_text(json.dumps(_text_run(14)))
    if questions is not None:
        (swe / "unknown-run.questions.json").write_text(json.dumps(questions))
    monkeypatch.setenv("AIDEN_REAL_DATA", str(tmp_path))
    return swe


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_recall_quality_skips_sessions_without_questions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _folder(tmp_path, monkeypatch)
    corpora, skipped = rq.build_corpora(True, "generated")
    assert corpora["real"] == []
    assert skipped == {
        "real sessions without questions": "1 of 1: unknown-run (no <name>.questions.json beside the .traj and not"
                                           " in REAL_QUESTIONS; they still feed short_queries)",
        "real": "no session has questions",
    }
    assert "short-real-unknown-run" in [c.name for c in corpora["short_queries"]]
    late: dict[str, str] = {}
    assert await rq.measure({"real": corpora["real"]}, skipped=late) == {}
    assert late == {}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_recall_quality_uses_a_sessions_questions_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _folder(tmp_path, monkeypatch, [["what did the second step print first?", "marker-1"],
                                    ["what did the last step print first?", "marker-13"]])
    corpora, skipped = rq.build_corpora(True, "generated")
    assert skipped == {}
    (conv,) = corpora["real"]
    assert (conv.name, [(q.text, q.marker) for q in conv.questions]) == ("real-unknown-run", [
        ("what did the second step print first?", "marker-1"), ("what did the last step print first?", "marker-13")])
    late: dict[str, str] = {}
    results = await rq.measure({"real": corpora["real"]}, skipped=late)
    # marker-13 is in the last step, which stays in the hot window; marker-1 was compacted.
    assert (results["real"]["questions"], results["real"]["dropped_hot"], late) == (1, 1, {})
    assert [r["question"] for r in results["real"]["records"]] == ["what did the second step print first?"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_recall_quality_reports_a_corpus_left_without_questions(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _folder(tmp_path, monkeypatch, [["what did the last step print first?", "marker-13"],
                                    ["what did nobody print?", "not in the session"]])
    corpora, _ = rq.build_corpora(True, "generated")
    late: dict[str, str] = {}
    assert await rq.measure({"real": corpora["real"]}, skipped=late) == {}
    assert late == {"real": "no question left to count (1 dropped hot, 1 without evidence)"}


def test_recall_quality_rejects_a_malformed_questions_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    swe = _folder(tmp_path, monkeypatch, {"what?": "marker-1"})
    with pytest.raises(SystemExit, match=r"unknown-run\.questions\.json: expected a JSON list of"):
        rq.real_corpus()
    (swe / "unknown-run.questions.json").write_text(json.dumps([["what?", ""]]))
    with pytest.raises(SystemExit, match="pairs of non-empty strings"):
        rq.real_corpus()


def _call(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


FUNCTION_CALLING = {
    "history": [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "ISSUE:\nSyntaxError: invalid syntax in missing_colon.py"},
        {"role": "assistant", "content": "Find the file.", "tool_calls": [_call("c1", "find_file", '{"file_name":"missing_colon.py"}')]},
        {"role": "tool", "content": "Found 1 match: tests/missing_colon.py", "tool_call_ids": ["c1"]},
        {"role": "assistant", "content": "Open it.", "tool_calls": [_call("c2", "open", '{"path":"tests/missing_colon.py"}')]},
        {"role": "tool", "content": "4:def division(a, b)", "tool_call_ids": ["c2"]},
        {"role": "assistant", "content": "Add the colon.", "tool_calls": [_call("c3", "edit", '{"search":"b)","replace":"b):"}')]},
        {"role": "tool", "content": "Replaced 1 occurrences.\nSyntaxError: gone", "tool_call_ids": ["c3"]},
    ],
}


def test_function_calling_history_gets_its_missing_tail_from_the_trajectory(tmp_path: Path) -> None:
    steps = [{"thought": t, "action": a, "observation": o} for t, a, o in (
        ("Find the file.", "find_file missing_colon.py", "Found 1 match: tests/missing_colon.py"),
        ("Open it.", 'open "tests/missing_colon.py"', "4:def division(a, b)"),
        ("Add the colon.", "edit 'b)' 'b):'", "Replaced 1 occurrences.\nSyntaxError: gone"),
        ("Fixed; submit.", "submit", "diff --git a/tests/missing_colon.py"),
    )]
    path = tmp_path / "cut.traj"
    path.write_text(json.dumps({**FUNCTION_CALLING, "trajectory": steps}))
    session = load_session(path)
    assert [(e.seq, e.type, e.tool_name, e.tool_call_id, e.content) for e in session.events[-4:]] == [
        (10, "tool_result", None, "c3", "Replaced 1 occurrences.\nSyntaxError: gone"),
        (11, "assistant_output", None, None, "Fixed; submit."),
        (12, "tool_call", "submit", "step3", ""),
        (13, "tool_result", "submit", "step3", "diff --git a/tests/missing_colon.py"),
    ]
    assert session.events[11].tool_args == '{"command": "submit"}'
    assert session.calls == (1, 4, 7, 10)
    # A history holding every step takes nothing from the trajectory.
    path.write_text(json.dumps({**FUNCTION_CALLING, "trajectory": steps[:3]}))
    assert len(load_session(path).events) == 10


def test_fidelity_drives_a_history_only_session(tmp_path: Path) -> None:
    (tmp_path / "history-only.traj").write_text(json.dumps(FUNCTION_CALLING))
    fidelity = _module("fidelity_run_loaders", ROOT / "benchmarks" / "fidelity" / "run.py")
    ((name, turns, facts),) = fidelity.real_sessions(tmp_path)
    assert name == "history-only"
    assert [(t.user[:6], [e.tool_args for e in t.events if e.type == "tool_call"], t.assistant) for t in turns] == [
        ("ISSUE:", ['{"cmd": "find_file missing_colon.py"}'], "Find the file."),
        ("(conti", ['{"cmd": "open tests/missing_colon.py"}'], "Open it."),
        ("(conti", ['{"cmd": "edit b) b):"}'], "Add the colon."),
    ]
    assert [(f.kind, f.text) for f in facts] == [("goal", "SyntaxError: invalid syntax in missing_colon.py"),
                                                  ("error_resolution", "SyntaxError: gone")]
    resume = _module("fidelity_resume_loaders", ROOT / "benchmarks" / "fidelity" / "resume.py")
    items = resume.real_checklist(tmp_path / "history-only.traj")
    assert [(i.name, i.keys) for i in items] == [
        ("goal", ("missing_colon.py", "syntaxerror", "invalid", "syntax")),
        ("file fixed", ("tests/missing_colon.py",)),
        ("error met", ("SyntaxError",)),
    ]


def test_locomo_files_without_questions_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "locomo").mkdir()
    doc = {"speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1:56 pm on 8 May, 2023",
           "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat"}]}
    (tmp_path / "locomo" / "own.json").write_text(json.dumps(doc))  # no "qa" at all
    (tmp_path / "locomo" / "own2.json").write_text(json.dumps({**doc, "qa": [{"question": "?", "category": 5}]}))
    monkeypatch.setenv("AIDEN_REAL_DATA", str(tmp_path))
    corpora, skipped = rq.build_corpora(True, "locomo")
    assert corpora == {"locomo": []}
    assert skipped == {"locomo conversations without questions": "2 of 2: locomo-own, locomo-own2 (no category 1-4"
                                                                 " question in the file)",
                       "locomo": "no conversation has questions"}
    import bench_recall_embedding
    import bench_warm_tier

    assert bench_warm_tier.conversations(10) == "no LoCoMo conversation has an answerable question (category 1-4)"
    assert "skipped: 2 of 2: own, own2" in capsys.readouterr().out
    assert bench_recall_embedding.load(tmp_path / "locomo" / "own.json")[1] == []
