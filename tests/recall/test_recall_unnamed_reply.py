"""Recall over a chat whose turns carry no speaker names: the reply to the matching turn.

With "Caroline: " before every turn, each of her turns matched a question naming her, so the reply
next to the turn holding the question's words could borrow its score. Without names the reply
often shares no word with the question: it is lent its neighbour's score all the same, and becomes
a hit when it outranks a weaker match that would take its place; while every match fits in the
answer, it is shown as the matching turn's ``context`` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.testing.embedding import HashingEmbedder
from tests.helpers import SMALL_MANUAL

# Alternating turns, no speaker names. Seq 3 holds the question's words, seq 4 (the reply) none of
# them; "work" alone is in four other turns, each between fillers (no match lends to another).
TURNS = [
    ("user", "morning, how was the weekend?"),
    ("assistant", "quiet, mostly reading on the porch."),
    ("user", "what helps you unwind after a long week of work?"),
    ("assistant", "I go running along the river most evenings."),
    ("user", "nice, I should try that sometime."),
    ("assistant", "work has been hectic since March."),
    ("user", "the kids started a new school term."),
    ("assistant", "they grow up fast, don't they."),
    ("user", "my work laptop died on Tuesday."),
    ("assistant", "that sounds like a rough start."),
    ("user", "I walk to work when it is sunny."),
    ("assistant", "the park looks lovely this time of year."),
    ("user", "work drinks are on Friday again."),
    ("assistant", "have fun, say hi from me."),
]
TAIL = ["ok", "sure", "right", "fine", "yes", "bye", "hm", "so", "well", "yep", "good", "later"]  # the hot window


async def _recall(
    root: Path, config: Config, embedder: HashingEmbedder | None = None, **args: Any
) -> tuple[list[int], dict[int, Any]]:
    """The seqs of the answer's results (TURNS[i] is i + 1), in order, and each result by seq."""
    async with aiden.open_memory(root, config=config, embedder=embedder) as memory:
        # The first turn stays in the prompt (the session's opening): a greeting.
        events = [SessionEvent(type="user_input", role="user", content="hello")]
        events += [SessionEvent(type="user_input" if r == "user" else "assistant_output", role=r, content=t)
                   for r, t in TURNS]
        events += [SessionEvent(type="user_input", role="user", content=t) for t in TAIL]
        stored = await memory.append_many(events)
        assert (await memory.maintain(manual=True)).compacted is True
        hot = {e.seq for e in await memory.hot_window()}
        assert not hot & {e.seq for e in stored[1 : len(TURNS) + 1]}
        answer = json.loads(await memory.handle_recall_tool(json.dumps(args)))
    base = stored[1].seq - 1  # TURNS[i] is at seq base + 1 + i
    results = answer["results"]
    return [r["seq"] - base for r in results], {r["seq"] - base: r for r in results}


@pytest.mark.anyio
@pytest.mark.parametrize(("k", "expected"), [(3, [3, 4, 2]), (5, [3, 4, 2, 5, 13])])
async def test_the_reply_outranks_weaker_matches_when_k_is_full(tmp_path: Path, k: int, expected: list[int]) -> None:
    # Five turns match and k of them fill the answer: the turns next to the strong match (the reply
    # first, then the turn before it) take the places of the weakest "work" turns.
    seqs, _ = await _recall(tmp_path, SMALL_MANUAL, query="unwind after work", k=k)
    assert seqs == expected


@pytest.mark.anyio
@pytest.mark.parametrize("k", [6, None])
async def test_with_fewer_matches_than_k_the_hits_are_the_matches(tmp_path: Path, k: int | None) -> None:
    # All five matches fit: the reply is no hit of its own but the matching turn's context.
    args = {"query": "unwind after work"} | ({"k": k} if k else {})
    seqs, by_seq = await _recall(tmp_path, SMALL_MANUAL, **args)
    assert seqs == [3, 13, 9, 11, 6]
    assert by_seq[3]["context"] == {"seq": by_seq[3]["seq"] + 1, "type": "assistant_output",
                                    "text": "I go running along the river most evenings."}


@pytest.mark.anyio
async def test_the_reply_outranks_weaker_matches_the_answer_has_no_room_for(tmp_path: Path) -> None:
    # Fewer matches than k, but they do not all fit in 500 characters: the reply competes for the room.
    config = msgspec.structs.replace(SMALL_MANUAL, recall_max_chars=500)
    seqs, _ = await _recall(tmp_path, config, query="unwind after work")
    assert seqs == [3, 4, 2]


@pytest.mark.anyio
async def test_hybrid_recall_keeps_every_turn_the_vectors_rank(tmp_path: Path) -> None:
    # The vectors rank all 14 turns, the ones next to a match too: none is left out as "lent only"
    # (the turns near the strong match rank higher for their neighbours' share).
    seqs, _ = await _recall(tmp_path, SMALL_MANUAL, HashingEmbedder(), query="unwind after work")
    assert seqs == [3, 2, 4, 1, 5, 8, 13, 9, 7, 11, 14, 6, 10, 12]


# An agent's session: the strong match is a tool's output (seq 3); the call before it and the
# turns after it hold none of the query's words. "checksum" alone is in four turns (seqs 7 to 13).
STEPS = [
    SessionEvent(type="user_input", role="user", content="the nightly export broke again, can you look?"),
    SessionEvent(type="tool_call", role="assistant", tool_name="bash", tool_call_id="c1",
                 tool_args='{"cmd": "cat exports/nightly.cfg"}'),
    SessionEvent(type="tool_result", role="tool", tool_name="bash", tool_call_id="c1",
                 content="compression = zstd\nchecksum = off"),
    SessionEvent(type="assistant_output", role="assistant", content="found it, the config turned a safety setting off."),
    SessionEvent(type="user_input", role="user", content="ok, go ahead and fix it."),
    SessionEvent(type="assistant_output", role="assistant", content="done, the export runs again."),
    SessionEvent(type="user_input", role="user", content="the checksum was my idea back then."),
    SessionEvent(type="assistant_output", role="assistant", content="understood, nothing lost."),
    SessionEvent(type="user_input", role="user", content="we added the checksum after the March outage."),
    SessionEvent(type="assistant_output", role="assistant", content="that makes sense."),
    SessionEvent(type="user_input", role="user", content="a checksum costs little anyway."),
    SessionEvent(type="assistant_output", role="assistant", content="true for small files."),
    SessionEvent(type="user_input", role="user", content="and the checksum caught a bad disk once."),
]


@pytest.mark.anyio
async def test_only_a_turn_next_to_a_matching_turn_joins_by_its_neighbours(tmp_path: Path) -> None:
    # k is full of matches, yet neither the tool call nor the turns after the matching tool output
    # take the place of one: a tool's output is no turn of the conversation, it lends nothing.
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        events = [SessionEvent(type="user_input", role="user", content="hello"), *STEPS]
        events += [SessionEvent(type="user_input", role="user", content=t) for t in TAIL]
        stored = await memory.append_many(events)
        assert (await memory.maintain(manual=True)).compacted is True
        answer = json.loads(await memory.handle_recall_tool(json.dumps({"query": "checksum compression", "k": 5})))
    base = stored[1].seq - 1  # STEPS[i] is at seq base + 1 + i
    # The four "checksum" turns, shortest first (BM25), ties newest first.
    assert [(r["seq"] - base, r["type"]) for r in answer["results"]] == [
        (3, "tool_result"), (11, "user_input"), (7, "user_input"), (13, "user_input"), (9, "user_input")
    ]


@pytest.mark.anyio
async def test_with_the_query_embedding_failing_the_search_stays_lexical(tmp_path: Path) -> None:
    # No vectors: the answer is the words search's, the reply next to the strong match included.
    embedder = HashingEmbedder()
    embedder.fail_with = aiden.RecallError("provider down")
    seqs, _ = await _recall(tmp_path, SMALL_MANUAL, embedder, query="unwind after work", k=3)
    assert seqs == [3, 4, 2]
