"""[Reliability] finding 3: a damaged experience record is set aside and said; it never kills the memory."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.experience.records import Evidence, ExperienceRecord, render_record_md
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

GOOD = ExperienceRecord(
    id="r-good",
    kind="procedure",
    status="active",
    title="Run the tests with tox",
    body="Use `tox -e py311` to run the tests.",
    evidence=(Evidence(episode_id="ep-1", seqs=(3, 4)),),
    created_at=1.0,
    updated_at=1.0,
)


def _damaged(kind: str) -> str:
    text = render_record_md(msgspec.structs.replace(GOOD, id="r-bad", title="Run the tests with nox"))
    header, rest = text.split("\n", 1)
    meta = json.loads(header.removeprefix("<!-- aiden-experience ").removesuffix(" -->"))
    if kind == "seq-over-64-bits":
        meta["evidence"] = [{"episode_id": "ep-1", "seqs": [2**64 + 5]}]
    elif kind == "negative-seq":
        meta["evidence"] = [{"episode_id": "ep-1", "seqs": [-1]}]
    elif kind == "wrong-types":
        meta["created_at"] = "yesterday"
    elif kind == "garbage":
        return "\x00\xff garbage"
    return f"<!-- aiden-experience {json.dumps(meta)} -->\n{rest}"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", ["seq-over-64-bits", "negative-seq", "wrong-types", "garbage"])
async def test_a_damaged_record_is_left_out_and_the_memory_lives(tmp_path: Path, kind: str) -> None:
    layout = Layout(tmp_path)
    store = RecordStore(layout, Storage())
    store.apply([GOOD, msgspec.structs.replace(GOOD, id="r-bad", title="Run the tests with nox")])
    folder = layout.experience / "procedure"
    (folder / "r-bad.md").write_text(_damaged(kind))
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        records = await memory.experience_records()
        assert [r.id for r in records] == ["r-good"]
        answer = json.loads(await memory.handle_tool_call("recall_experience", {"query": "run the tests"}))
        assert "error" not in answer
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="still alive"))
    assert (folder / "r-good.md").exists()
