"""Recall over a chat whose turns carry no speaker names: the reply to the matching turn.

With "Caroline: " before every turn, each of her turns matched a question naming her, so the reply
next to the turn holding the question's words could borrow its score. Without names the reply
often shares no word with the question: it is lent its neighbour's score all the same, and becomes
a hit when it outranks a weaker match that would take its place; while every match fits in the
answer it is none (the reply after a user's turn shows as that turn's ``context``, room left).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
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
    assert seqs == [3, 2, 4, 1, 8, 5, 7, 14, 13, 9, 11, 6, 10, 12]


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


async def _answer(
    root: Path, config: Config, events: list[SessionEvent], embedder: HashingEmbedder | None = None,
    *, vectors: bool = True, **args: Any
) -> tuple[list[int], dict[int, Any]]:
    """The seqs of the answer's results over ``events`` (events[i] is i + 1) and each result by seq;
    with ``vectors`` False the maintenance pass's embedding fails (the query's does not)."""
    async with aiden.open_memory(root, config=config, embedder=embedder) as memory:
        stored = await memory.append_many([SessionEvent(type="user_input", role="user", content="hello"), *events])
        stored += await memory.append_many([SessionEvent(type="user_input", role="user", content=t) for t in TAIL])
        if embedder is not None and not vectors:
            embedder.fail_with = aiden.RecallError("provider down")
        while (await memory.maintain(manual=True)).compacted:
            pass
        assert not {e.seq for e in await memory.hot_window()} & {e.seq for e in stored[1 : len(events) + 1]}
        if embedder is not None:
            embedder.fail_with = None
        answer = json.loads(await memory.handle_recall_tool(json.dumps(args)))
    base = stored[1].seq - 1
    return [r["seq"] - base for r in answer["results"]], {r["seq"] - base: r for r in answer["results"]}


def _turns(pairs: list[tuple[str, str]]) -> list[SessionEvent]:
    return [SessionEvent(type="user_input" if r == "user" else "assistant_output", role=r, content=t) for r, t in pairs]


@pytest.mark.anyio
async def test_hybrid_recall_before_the_events_have_vectors_keeps_the_lexical_rule(tmp_path: Path) -> None:
    # The maintenance pass failed to embed: no vector ranks a turn, so the answer is the words
    # search's (test_with_fewer_matches_than_k_the_hits_are_the_matches), the reply as context.
    seqs, by_seq = await _answer(tmp_path, SMALL_MANUAL, _turns(TURNS), HashingEmbedder(), vectors=False,
                                 query="unwind after work", k=6)
    assert seqs == [3, 13, 9, 11, 6]
    assert by_seq[3]["context"]["text"] == "I go running along the river most evenings."


# More events than the vectors rank (100): the reply (seq 3) and the turn before the question (seq 1)
# are not among the 100 nearest; 400 fillers close to the query by their letters (no query word) are,
# one text (one result: a text is shown once).
LONG = [("user", "morning, how was the weekend?"), ("user", "what helps you unwind after a long week of work?"),
        ("assistant", "I go running along the river most evenings."), ("user", "nice, I should try that sometime.")]
LONG += [("user" if s % 2 else "assistant", "unwound weekend longing afterward workshops") for s in range(5, 405)]
LONG += [("user", "work drinks are on friday"), ("assistant", "have fun"), ("user", "my work laptop died"),
         ("assistant", "the garage, the attic, the shed, the car, the boat, the bikes, the lawn, the fence, the gutters"
                       " and the windows all wait for the weekend; the boiler, the lights, the tiles, the stairs, the"
                       " sink, the taps, the doors and the drains can wait a month or two, the shopping and the work not")]


@pytest.mark.anyio
async def test_hybrid_recall_keeps_the_rule_for_turns_the_vectors_do_not_rank(tmp_path: Path) -> None:
    # The four matches and the fillers (one text) fit in the answer: the turns next to the strong
    # match (1 and 3), above the weakest match for their neighbour's share, are no results of their own.
    seqs, by_seq = await _answer(tmp_path, SMALL_MANUAL, _turns(LONG), HashingEmbedder(), query="unwind after work")
    assert seqs == [2, 407, 405, 408, 403]
    assert by_seq[2]["context"]["seq"] == by_seq[2]["seq"] + 1


# 20 rare matches ("zebra") between turns matching nothing, then 100 frequent ones ("work").
CROWD: list[tuple[str, str]] = []
for n in range(20):
    CROWD += [("user", f"filler a{n}"), ("assistant", f"filler b{n}"), ("user", f"zebra crossing {n}"),
              ("assistant", f"filler c{n}"), ("user", f"filler d{n}"), ("assistant", "ok")]
for n in range(100):
    CROWD += [("user", f"work item {n}"), ("assistant", "ok"), ("user", f"misc {n}"), ("assistant", f"misc more {n}")]


@pytest.mark.anyio
async def test_turns_next_to_matches_take_no_ranking_place_from_a_match(tmp_path: Path) -> None:
    # The 40 turns next to a "zebra" outrank the "work" matches, but all 120 matches fit in 20,000
    # characters and 100 results (k): none of the 40 takes a match's place.
    config = msgspec.structs.replace(SMALL_MANUAL, recall_max_chars=20_000)
    seqs, by_seq = await _answer(tmp_path, config, _turns(CROWD), query="zebra work", k=100)
    # The 100 best matching rows, as without the rule: 20 "zebra" and 79 "work" turns, and a chunk
    # summary (not shown: its chunk has results).
    assert len(seqs) == 99
    assert sum("zebra" in by_seq[s]["text"] for s in seqs) == 20
    assert sum("work" in by_seq[s]["text"] for s in seqs) == 79


@pytest.mark.anyio
async def test_a_turn_next_to_a_match_is_not_raised_by_the_query_date(tmp_path: Path) -> None:
    # The question (seq 2) just before May, its reply (seq 3) within it: with k=1 the reply, matching
    # no word, does not take the question's place for its date.
    def at(role: str, text: str, when: str) -> SessionEvent:
        ts = datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()
        return SessionEvent(type="user_input" if role == "user" else "assistant_output", role=role,
                            content=text, timestamp=ts)
    events = [at("user", "hey", "2023-04-30T23:40"), at("user", "did the zebra budget get approved?", "2023-04-30T23:50"),
              at("assistant", "yes, finance signed it off this morning.", "2023-05-01T00:10"),
              at("user", "great", "2023-05-01T00:11"), at("assistant", "ok", "2023-05-01T00:12"),
              at("user", "zebra logo drafts are due in June, by the way", "2023-06-02T10:00"),
              at("assistant", "noted", "2023-06-02T10:01")]
    seqs, by_seq = await _answer(tmp_path, SMALL_MANUAL, events, query="zebra budget in May 2023", k=1)
    assert seqs == [2]
    assert by_seq[2]["context"]["seq"] == by_seq[2]["seq"] + 1
