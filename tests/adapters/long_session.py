"""One long, tool-heavy session for every adapter's window-promise test.

``TURNS`` questions; for each the model reads ``CALLS_PER_TURN`` files one call at a
time, then answers. File sizes cycle through about 330, 900 and 1,800 tokens: the
largest is over ``oversized_tool_percent`` of a 4k window's budget (stubbed even in
the current turn), the middle one over the governance threshold, and one turn's
outputs alone are more than the budget. The session's tool output is about seven
windows, so it compacts several times.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aiden
from aiden.context.prompt import estimate_messages

__all__ = [
    "CALLS_PER_TURN",
    "CONFIG",
    "INSTRUCTIONS",
    "TURNS",
    "WINDOW",
    "Script",
    "prompt_tokens",
    "question",
    "tool_output",
]

WINDOW: Final = 4000
TURNS: Final = 8
CALLS_PER_TURN: Final = 3
CONFIG: Final = aiden.Config(durability="none", summary_layer_percent=5.0)
INSTRUCTIONS: Final = "You maintain a Python service. Read the files you need, then answer in one line."
_LINES: Final = (20, 55, 110)


def question(turn: int) -> str:
    """The user's input of ``turn``."""
    return f"question {turn}: which values in the next files look wrong?"


def tool_output(n: int) -> str:
    """The ``n``-th file read (deterministic; its size depends on ``n % 3``)."""
    rnd = random.Random(n)
    lines = _LINES[n % len(_LINES)]
    return "\n".join(f"line {i} of file{n}.py: value={rnd.randint(0, 10**6)} status ok" for i in range(lines))


class Script:
    """The model of the session: per question, ``CALLS_PER_TURN`` file reads (one per call), then the answer.

    The test says when a question starts (:meth:`ask`): the prompt may not show the
    question as a user message any more once a compaction cut the turn (it is then in
    the split-turn context).
    """

    ANSWER: Final = "done: the values look fine"

    def __init__(self) -> None:
        self.files = 0
        self._reads = CALLS_PER_TURN

    def ask(self, turn: int) -> str:
        """Start question ``turn``; returns its text."""
        self._reads = 0
        return question(turn)

    def step(self) -> int | None:
        """The file to read next (numbered from 1), or None to answer."""
        if self._reads == CALLS_PER_TURN:
            return None
        self._reads += 1
        self.files += 1
        return self.files

    def chat_responder(self) -> Any:
        """A :class:`~aiden.testing.FakeLLMServer` responder playing this script."""

        def respond(body: dict[str, Any]) -> dict[str, Any] | str:
            n = self.step()
            if n is None:
                return Script.ANSWER
            return {
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"n": n})},
                    }
                ],
            }

        return respond


def prompt_tokens(messages: Sequence[Mapping[str, Any]], memory: aiden.Memory) -> int:
    """The estimate ``build_messages`` gives a prompt, for chat messages as a framework sent them."""
    return estimate_messages([dict(m) for m in messages], memory.estimate_text)
