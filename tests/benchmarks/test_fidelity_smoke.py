"""The fidelity benchmark in CI's quick mode: the embedded default, plus the LLM path on a local server."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_fidelity() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("fidelity_run", ROOT / "benchmarks" / "fidelity" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_fidelity_quick_mode() -> None:
    fidelity = load_fidelity()
    # 40 turns (quick mode's length): the benchmark grades after >= 10 compactions, and shorter
    # summaries compact less often (without the Commands and tool-result noise, 30 turns gave 8).
    results = fidelity.run(True, True, None, seeds=[3], turns=40, real=False)
    runs = results["runs"]
    extractive = runs["extractive (embedded default)"]
    assert extractive["min_compactions"] >= 10
    facts = [f for s in extractive["sessions"] for f in s["per_fact"]]
    in_context = sum(f["in_context"] for f in facts) / len(facts)
    recallable = sum(f["recallable"] for f in facts) / len(facts)
    # The targets for the embedded summarizer; a miss here is a real regression.
    assert in_context >= 0.85, extractive["per_kind"]
    assert recallable == 1.0, extractive["per_kind"]
    llm = runs["LiteLLMSummarizer via local fake server (plumbing only)"]
    assert llm["min_compactions"] >= 10
    assert "| fact kind |" in results["table"]


def load_resume() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("fidelity_resume", ROOT / "benchmarks" / "fidelity" / "resume.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_resume_quick_mode() -> None:
    resume = load_resume()
    results = resume.run(seeds=[1], turns=40, real=False)
    (session,) = results["runs"]["extractive (embedded default)"]
    assert session["compactions"] >= 10
    missing = [g["name"] for g in session["graded"] if not g["found"]]
    assert missing == [], session["graded"]
    assert session["misfiled_requests"] == 0
    assert "| checklist item |" in results["table"]
