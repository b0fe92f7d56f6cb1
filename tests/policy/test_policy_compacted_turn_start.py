"""Which compacted user input is the current turn's (the prompt shows it again after a cut inside its turn)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from aiden.events import SessionEvent
from aiden.policy.cutpoints import compacted_turn_start


@dataclass(frozen=True)
class _Chunk:
    name: str
    cut_meta: Mapping[str, Any] | None


def _split(name: str, turn_start: int) -> _Chunk:
    return _Chunk(name, {"is_split_turn": True, "turn_start_seq": turn_start})


def _hot(*inputs: int) -> list[SessionEvent]:
    """A hot window holding user inputs of ``inputs`` seqs (the kept root, a pin) and a tool step."""
    events = [SessionEvent(type="user_input", content=f"input {s}", seq=s) for s in inputs]
    return [*events, SessionEvent(type="assistant_output", content="on it", seq=99)]


@pytest.mark.parametrize(
    ("hot", "chunks", "expected"),
    [
        (_hot(1), [], None),  # nothing compacted
        (_hot(1), [_Chunk("a", None)], None),  # an ordinary cut on a user input
        (_hot(1), [_Chunk("a", {"is_split_turn": False, "turn_start_seq": 7})], None),
        (_hot(1), [_split("a", 7)], (7, "a")),  # the cut took seq 7, the turn's input
        (_hot(1), [_split("a", 7), _split("b", 1)], (7, "a")),  # cut again: b saw only the kept root
        (_hot(1, 9), [_split("a", 7)], None),  # a newer input is hot: the turn of seq 7 is over
        (_hot(1), [_split("a", 1)], None),  # every split named the kept root: its input is hot
        (_hot(1), [_split("a", 7), _Chunk("b", {"is_split_turn": True})], None),  # no seq named
    ],
)
def test_the_compacted_input_of_the_current_turn(
    hot: list[SessionEvent], chunks: list[_Chunk], expected: tuple[int, str] | None
) -> None:
    found = compacted_turn_start(hot, chunks)
    assert (None if found is None else (found[0], found[1].name)) == expected
