"""Pausing an OpenAI Agents SDK run over aiden's stubbed, compacted history, and carrying on.

The SDK's human-in-the-loop flow: a tool with ``needs_approval`` interrupts the run,
``result.to_state().to_string()`` keeps it (here across a process restart, with a
compaction during the pause), and ``Runner.run(agent, state, session=...)`` resumes
it after ``state.approve``. A user may also never approve and start the next run with
a new message. Either way every request stays within the budget, pairs every tool
call with its output, and the early tool results compacted away stay recallable.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

import aiden  # noqa: E402
from aiden.adapters.openai_agents import AidenSession  # noqa: E402
from aiden.context.governance import STUB_PREFIX  # noqa: E402
from aiden.context.prompt import MISSING_RESULT  # noqa: E402
from aiden.testing import FakeLLMServer  # noqa: E402
from tests.adapters import long_session  # noqa: E402

pytestmark = pytest.mark.anyio
PAUSE_TURN = 4
FIX_CALL = "call_fix"


class _Approvals:
    """The long session's script, except that question ``PAUSE_TURN`` ends with a fix needing approval."""

    def __init__(self) -> None:
        self.script = long_session.Script()
        self._fix_pending = False
        self._answer = self.script.chat_responder()

    def ask(self, turn: int) -> str:
        self._fix_pending = turn == PAUSE_TURN
        return self.script.ask(turn)

    def respond(self, body: dict[str, Any]) -> dict[str, Any] | str:
        if self._fix_pending and self.script.files == (PAUSE_TURN + 1) * long_session.CALLS_PER_TURN:
            self._fix_pending = False
            call = {"name": "apply_fix", "arguments": json.dumps({"n": self.script.files})}
            return {"content": None, "tool_calls": [{"id": FIX_CALL, "type": "function", "function": call}]}
        return self._answer(body)


def _well_paired(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether each assistant message's tool calls are followed by exactly their outputs, and no output is loose."""
    n = 0
    while n < len(messages):
        message = messages[n]
        n += 1
        if message["role"] == "tool":
            return False
        calls = [c["id"] for c in message.get("tool_calls") or []]
        outputs = [m.get("tool_call_id") for m in messages[n : n + len(calls)] if m["role"] == "tool"]
        if len(set(calls)) != len(calls) or Counter(outputs) != Counter(calls):
            return False
        n += len(calls)
    return True


def _open(root: Path) -> Any:
    return aiden.open_memory(root, config=long_session.CONFIG, context_window=long_session.WINDOW)


async def _run(
    agent: Any, given: Any, session: AidenSession, builds: list[aiden.PromptBuild], streamed: bool
) -> Any:
    """One ``Runner.run`` (or streamed run) through the session, its filter and usage hooks."""
    from agents import RunConfig, Runner
    from agents.run_config import CallModelData, ModelInputData

    async def recorded(data: CallModelData[Any]) -> ModelInputData:
        sent = await session.call_model_input_filter(data)
        assert session.last_prompt is not None
        builds.append(session.last_prompt)
        return sent

    config = RunConfig(call_model_input_filter=recorded)
    if not streamed:
        return await Runner.run(agent, given, session=session, run_config=config, hooks=session.usage_hooks())
    result = Runner.run_streamed(
        agent, given, session=session, run_config=config, hooks=session.usage_hooks()
    )
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize(("resume", "streamed"), [("approve", False), ("approve", True), ("abandon", True)])
async def test_a_paused_run_carries_on_within_budget_and_recallable(
    tmp_path: Path, resume: str, streamed: bool
) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, RunState, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    applied: list[int] = []

    @function_tool
    def read_file(n: int) -> str:
        """Read one of the project's files."""
        return long_session.tool_output(n)

    @function_tool(needs_approval=True)
    def apply_fix(n: int) -> str:
        """Fix a file (a person approves it first)."""
        applied.append(n)
        return f"fixed file{n}.py"

    play = _Approvals()
    builds: list[aiden.PromptBuild] = []
    with FakeLLMServer(responder=play.respond) as server:
        agent = Agent(
            name="a",
            instructions=long_session.INSTRUCTIONS,
            tools=[read_file, apply_fix],
            model=OpenAIChatCompletionsModel(
                model="fake", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="x")
            ),
        )
        async with _open(tmp_path) as memory:
            session = AidenSession(memory)
            for turn in range(PAUSE_TURN + 1):
                result = await _run(agent, play.ask(turn), session, builds, streamed)
                await memory.maintain()
            compacted_before_pause = memory.stats().compactions
            assert [i.tool_name for i in result.interruptions] == ["apply_fix"]
            assert result.final_output is None
            paused = result.to_state().to_string()
        # The process ends; a later one resumes the run after a compaction during the pause (or before
        # it: with aiden's own prompt estimate the paused run's reads may be compacted already).
        async with _open(tmp_path) as memory:
            await memory.maintain(manual=True)
            paused_read = f"call_{(PAUSE_TURN + 1) * long_session.CALLS_PER_TURN - 1}"
            assert paused_read not in {e.tool_call_id for e in await memory.hot_window()}
            session = AidenSession(memory)
            if resume == "approve":
                state = await RunState.from_string(agent, paused)
                for interruption in state.get_interruptions():
                    state.approve(interruption)
                result = await _run(agent, state, session, builds, streamed)
                assert result.final_output == long_session.Script.ANSWER
            for turn in range(PAUSE_TURN + 1, long_session.TURNS):
                result = await _run(agent, play.ask(turn), session, builds, streamed)
                assert result.final_output == long_session.Script.ANSWER
                await memory.maintain()
            budget = memory.config.prompt_budget()
            requests = [r.body["messages"] for r in server.requests]
            sent = [long_session.prompt_tokens(m, memory) for m in requests]
            history = await session.full_history()
            recalled = json.loads(await memory.handle_recall_tool({"query": "line 3 of file1.py value"}))
    approved = resume == "approve"
    calls = long_session.TURNS * (long_session.CALLS_PER_TURN + 1) + approved
    assert (len(requests), len(builds), budget) == (calls, calls, 3500)
    assert compacted_before_pause >= 1
    # Every request is aiden's prompt, within the budget, with each call and its output together.
    # The messages as sent; the tool schemas sent beside them count in the estimate too.
    assert sent == [b.estimated_tokens - b.tool_tokens for b in builds]
    assert all(b.tool_tokens > 0 and b.checked_tokens >= b.estimated_tokens for b in builds)
    assert max(sent) <= budget
    assert [b.over_budget for b in builds] == [False] * calls
    assert [_well_paired(m) for m in requests] == [True] * calls
    # The resumed call sends the approved call with its result; an abandoned one gets aiden's placeholder.
    after_pause = (PAUSE_TURN + 1) * (long_session.CALLS_PER_TURN + 1)
    fix_at = (PAUSE_TURN + 1) * long_session.CALLS_PER_TURN
    shown = [m["content"] for m in requests[after_pause] if m.get("tool_call_id") == FIX_CALL]
    # The paused run's largest read (over its share of the budget) was stubbed before the pause; the
    # compaction during the pause took it, so the resumed run's own input, which holds it in full,
    # does not bring it back.
    big = f"call_{fix_at - 1}"
    before, after = (
        [m["content"] for m in requests[r] if m.get("tool_call_id") == big]
        for r in (after_pause - 1, after_pause)
    )
    assert [str(c).startswith(STUB_PREFIX) for c in before] == [True]
    assert after == []
    assert long_session.tool_output(fix_at - 1) not in json.dumps(requests[after_pause:])
    assert shown == ([f"fixed file{fix_at}.py"] if approved else [MISSING_RESULT])
    assert applied == ([fix_at] if approved else [])
    # The log holds each item once, as the SDK wrote it: no placeholder, no question twice.
    users = [i["content"] for i in history if i.get("role") == "user"]
    assert users == [long_session.question(t) for t in range(long_session.TURNS)]
    call_ids = [i["call_id"] for i in history if i.get("type") == "function_call"]
    output_ids = [i["call_id"] for i in history if i.get("type") == "function_call_output"]
    reads = [f"call_{n}" for n in range(1, long_session.TURNS * long_session.CALLS_PER_TURN + 1)]
    assert call_ids == [*reads[:fix_at], FIX_CALL, *reads[fix_at:]]
    assert output_ids == (call_ids if approved else reads)
    answers = [i for i in history if i.get("role") == "assistant"]
    assert len(answers) == long_session.TURNS - (not approved)
    # The first file's result was compacted long ago: no later request shows it, recall still finds it.
    fact = long_session.tool_output(1).splitlines()[3]
    assert all(fact not in json.dumps(m) for m in requests[after_pause:])
    best = recalled["results"][0]
    assert (best["seq"], best["type"], best["chunk_id"][:6]) == (3, "tool_result", "chunk_")
    assert fact in best["text"]
