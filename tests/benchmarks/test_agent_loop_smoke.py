"""CI-sized run of benchmarks/bench_agent_loop.py: a litellm agent loop never overflows the window."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_agent_loop  # noqa: E402

from aiden.testing import FakeLLMServer  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", ["extractive", "llm", "failing", "verbose"])
async def test_agent_loop_at_8k_defaults_never_overflows(tmp_path: Path, kind: str) -> None:
    real = bench_agent_loop._o200k()
    assert real is not None  # litellm bundles the o200k encoding: counted offline
    with FakeLLMServer(responder=bench_agent_loop._responder(4)) as server:
        row = await bench_agent_loop.run_loop(
            8000, kind, turns=5, steps=4, root=tmp_path, server=server, real_count=real
        )
    assert row["model_calls"] == 25
    assert (row["over_budget_estimate"], row["over_budget_o200k"], row["over_budget_o200k_with_tools"]) == (0, 0, 0)
    assert row["summary_layer_share_max"] <= 0.15
