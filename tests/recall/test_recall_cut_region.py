"""Where recall cuts a long compacted event: around the region richest in the query's rare words, not
the first match of any query word (the real SWE-agent task recalled by its issue title showed the
worked demonstration before it: the hunt adapters-e2e60, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.events import SessionEvent
from aiden.recall.query import content_terms, match_finder, snippet
from tests.helpers import SMALL_MANUAL

# Words of no query below, varied so that no stretch of them looks like another.
_FILLER = " ".join(f"line{i} holds nothing of note here." for i in range(300))


async def _recall(root: Path, long_text: str, others: list[str], query: str) -> str:
    """The text recall shows of ``long_text`` (an event compacted with ``others``) for ``query``."""
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        texts = ["Let us start.", long_text, *others, "go on"]
        stored = await memory.append_many([SessionEvent(type="user_input", role="user", content=t) for t in texts])
        assert (await memory.maintain(manual=True)).compacted is True
        assert stored[1].seq not in [e.seq for e in await memory.hot_window()]
        answer = json.loads(await memory.handle_recall_tool(json.dumps({"query": query})))
    hit = next(r for r in answer["results"] if r.get("seq") == stored[1].seq)
    assert hit["truncated"] is True
    text: str = hit["text"]
    return text


@pytest.mark.anyio
async def test_a_cut_shows_the_rare_words_not_the_first_common_one(tmp_path: Path) -> None:
    # "deploy" and "staging" are in every event, "kestrel" and "checksum" only at the end of the long one.
    tail = "The artifact checksum mismatch came from the kestrel mirror."
    long_text = f"We deploy to staging first. {_FILLER} {tail}"
    others = [f"deploy {i} went to staging without trouble" for i in range(12)]
    text = await _recall(tmp_path, long_text, others, "deploy staging kestrel checksum")
    assert tail in text
    assert "We deploy to staging first." not in text


@pytest.mark.anyio
async def test_a_cut_shows_where_the_query_words_are_together(tmp_path: Path) -> None:
    # The pydicom shape: one query word early in the task, the issue title with all of them at its end.
    title = "Pixel Representation attribute should be optional"
    long_text = f"Arguments are optional in this demonstration. {_FILLER} The issue: {title}."
    text = await _recall(tmp_path, long_text, [f"step {i}: go on" for i in range(12)], title)
    assert f"The issue: {title}." in text
    assert "Arguments are optional" not in text


@pytest.mark.anyio
async def test_a_stem_only_match_is_cut_around_its_rare_words(tmp_path: Path) -> None:
    # The text holds none of the query's spellings: the cut goes by the words the index matched,
    # weighed by rarity (two common words early lose to one rare word at the end).
    tail = "Then the kestrel feed failed."
    long_text = f"Each checksum is verified on the mirror. {_FILLER} {tail}"
    others = [f"checksum {i} verified on the mirror" for i in range(12)]
    text = await _recall(tmp_path, long_text, others, "checksums mirrors kestrels")
    assert tail in text
    assert "Each checksum is verified" not in text


@pytest.mark.parametrize("width", [120, 200])
def test_a_cut_narrower_than_the_region_still_shows_its_rarest_word(width: int) -> None:
    # The region holds a common word and, 200 characters on, the rare one: a cut centred on the
    # region's whole span showed its start, the common word (a review finding).
    text = "intro words " * 40 + "we deploy the service every day. " + "filler text goes here. " * 8
    text += "The zorblax crash happened." + " tail words" * 40
    terms = content_terms("deploy zorblax")
    finder = match_finder(terms, lambda: {"deploy": 0.2, "zorblax": 5.0})
    assert "zorblax" in snippet(text, terms, width, finder=finder)
