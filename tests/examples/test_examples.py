"""The examples and the demo run as tests (no network: a local OpenAI-compatible server)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import aiden
from aiden.demo import run_demo
from aiden.testing import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_agent_loop_against_local_server(tmp_path: Path) -> None:
    import litellm

    example = load_example("agent_loop")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "main.py").write_text("print('hi')\n")

    def responder(body: dict[str, Any]) -> dict[str, Any] | str:
        last = body["messages"][-1]
        if last["role"] == "user":
            return {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "list_files", "arguments": '{"directory": "."}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {
                            "name": "recall_session_chunks",
                            "arguments": '{"query": "earlier decision"}',
                        },
                    },
                ],
            }
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        return f"found {json.loads(tool_results[0]['content'])}"

    with FakeLLMServer(responder=responder) as server:
        async with aiden.open_memory(tmp_path / "mem", config=aiden.Config(durability="none")) as memory:
            answer = await example.run_agent(
                memory,
                "what files are there?",
                model="openai/test-model",
                workspace=tmp_path / "ws",
                completion=litellm.acompletion,
                api_base=server.base_url,
                api_key="sk-test",
            )
            hot = await memory.hot_window()
        requests = server.requests
    assert answer == "found ['main.py']"
    assert [e.type for e in hot] == [
        "user_input",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "assistant_output",
    ]
    recall_result = json.loads(hot[4].content)
    assert "error" not in recall_result
    second = requests[1].body
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert {t["function"]["name"] for t in second["tools"]} == {"list_files", "recall_session_chunks"}


async def test_demo_runs_on_the_embedded_default(tmp_path: Path) -> None:
    lines: list[str] = []
    result = await run_demo(tmp_path, turns=24, echo=lines.append)
    assert result.turns == 24
    assert result.stats.compactions >= 3
    assert result.summary_md.startswith("# Session History (compressed chunks)")
    assert result.recall_top_chunk is not None
    assert result.recall_found_fact
    assert result.final_prompt_tokens < 8000
    assert any(line.startswith("turn  24/24") for line in lines)
    assert any("recall_session_chunks" in line for line in lines)


def test_every_example_runs_as_a_test() -> None:
    """Each file in examples/ is loaded by a test (this file, or its adapter's under tests/adapters)."""
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    examples = sorted(p.stem for p in (ROOT / "examples").glob("*.py"))
    assert examples == ["agent_loop", "langchain_middleware", "openai_agents_session", "pydantic_ai_history"]
    untested = [
        name
        for name in examples
        if f'load_example("{name}")' not in tests and f'"examples" / "{name}.py"' not in tests
    ]
    assert untested == []


def test_agent_loop_runs_offline_without_arguments(tmp_path: Path) -> None:
    """``python examples/agent_loop.py`` with no --model: the local scripted server, exit 0, nothing on stderr."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.py").write_text("")
    (tmp_path / "ws" / "b.txt").write_text("")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--workspace", str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "The workspace holds: a.py, b.txt"
    assert list(tmp_path.iterdir()) == [tmp_path / "ws"]  # the memory went to a temp dir, not the cwd
