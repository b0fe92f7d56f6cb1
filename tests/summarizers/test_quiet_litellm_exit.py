"""A process whose LiteLLM summarizer ran on trio (aiden's litellm loop thread) and on asyncio
exits without a word on stderr.

litellm's logging worker starts a task on the loop of each call; every time it moves back to
the loop thread it starts another there, and that task is never done. Closing the loop thread
at exit with such tasks pending printed "Task was destroyed but it is pending!
... LoggingWorker._worker_loop()" after everything else (after pytest's summary line in a test
run). Only a fresh interpreter shows it: the message comes at interpreter exit.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

SCRIPT = r"""
import json

import anyio

from aiden.events import SessionEvent
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import FakeLLMServer

REQUEST = SummaryRequest(purpose="history", events=(SessionEvent(type="user_input", seq=1, content="Add CSV export."),))


async def summarize(summarizer):
    return (await summarizer.summarize(REQUEST)).text


with FakeLLMServer(responder=lambda body: json.dumps({"text": "Goal: Add CSV export"})) as server:
    summarizer = LiteLLMSummarizer("openai/fake", api_base=server.base_url, api_key="x")
    # trio (the loop thread), asyncio (the caller's loop), trio again: the worker comes back.
    texts = [anyio.run(summarize, summarizer, backend=b) for b in ("trio", "asyncio", "trio")]
print(texts)
"""


def test_trio_then_asyncio_then_trio_exits_quietly() -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50, env=env, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "['Goal: Add CSV export', 'Goal: Add CSV export', 'Goal: Add CSV export']\n"


def test_a_logging_worker_left_behind_on_the_loop_thread_is_not_destroyed_pending() -> None:
    """trio, then asyncio: litellm's logging worker moves to the caller's loop and drops its task
    on aiden's loop thread, still pending. A garbage collection then printed "Task was destroyed
    but it is pending!" (in the middle of a test run, where other tests collect)."""
    script = SCRIPT.replace(
        'for b in ("trio", "asyncio", "trio")]', 'for b in ("trio", "asyncio")]\nimport gc\ngc.collect()'
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=50, env=env, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "['Goal: Add CSV export', 'Goal: Add CSV export']\n"

