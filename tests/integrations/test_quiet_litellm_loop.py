"""Issue #20, as measured there: a 60-turn agent loop making its own litellm calls, with aiden's
LiteLLM summarizer compacting in the background, prints nothing at all to stderr.

The issue's run printed 575 stderr lines ("Task was destroyed but it is pending! ...
LoggingWorker", "event loop changed"); plain litellm without aiden printed none. The loop
runs in a fresh interpreter because that noise comes from the garbage collector and from
interpreter exit, which only a child process shows; its whole stderr must be empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)

TURNS = 60

# As an agent loop is written against the README: one litellm call per turn with aiden's
# prompt, usage recorded from the response, a tool call and its (large) result appended,
# the run committed; maintenance is scheduled by aiden and never awaited.
SCRIPT = r"""
import asyncio, gc, json, sys, tempfile

import litellm

import aiden
from aiden.testing import FakeLLMServer

SUMMARY = json.dumps({"text": "Ran make in each turn; the build passes.", "facts": ["the build passes"]})


def respond(body):
    # The application calls model "app", aiden's summarizer model "summarizer".
    return "done" if body["model"] == "app" else SUMMARY


async def main(turns: int) -> None:
    with FakeLLMServer(responder=respond) as server, tempfile.TemporaryDirectory() as tmp:
        config = aiden.Config.for_window(4000)
        summarizer = aiden.LiteLLMSummarizer(
            "openai/summarizer", config=config, api_base=server.base_url, api_key="x"
        )
        async with aiden.open_memory(tmp, config=config, summarizer=summarizer) as memory:
            for turn in range(turns):
                await memory.begin_run(f"turn {turn}: run make")
                prompt = await memory.build_messages()
                response = await litellm.acompletion(
                    model="openai/app", api_base=server.base_url, api_key="x", messages=prompt.messages
                )
                await memory.record_usage(usage=response.usage)
                await memory.append_message({"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{turn}", "type": "function", "function": {"name": "sh", "arguments": '{"cmd": "make"}'}}
                ]})
                await memory.append_message({"role": "tool", "tool_call_id": f"c{turn}",
                                             "content": f"make: step {turn} ok\n" * 80})
                await memory.commit_run(response.choices[0].message.content or "")
            await memory.maintain()  # let a pass scheduled by the last turn finish inside the block
            stats = memory.stats()
        print(json.dumps({
            "compactions": stats.compactions,
            "fallbacks": stats.fallbacks,
            "llm_calls": summarizer.stats().calls,
            "llm_successes": summarizer.stats().successes,
            "app_requests": sum(1 for r in server.requests if r.body["model"] == "app"),
        }))
    gc.collect()  # orphaned tasks are reported when collected: collect while stderr is still read


asyncio.run(main(int(sys.argv[1])))
"""


def run_loop() -> tuple[dict[str, Any], str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TURNS)],
        capture_output=True,
        text=True,
        timeout=170,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_60_turn_litellm_loop_with_the_litellm_summarizer_prints_nothing_to_stderr() -> None:
    counts, stderr = run_loop()
    assert stderr == ""
    assert counts["app_requests"] == TURNS
    # The compactions really went through litellm, beside the application's own calls.
    assert counts["compactions"] >= 5
    assert counts["llm_successes"] >= counts["compactions"]
    assert counts["llm_calls"] == counts["llm_successes"]
    assert counts["fallbacks"] == 0
