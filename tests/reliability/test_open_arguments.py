"""Opening and configuring refuse a wrong-typed or out-of-range argument with an AidenError (no
TypeError, AttributeError or UnicodeEncodeError from deep inside), and a refused open leaves
nothing behind: the same root opens after it. The blocking facade gives the same errors and its
loop thread keeps serving after a refused call."""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import aiden
import aiden.sync
from aiden import SessionEvent
from aiden.testing import ScriptedSummarizer
from tests.reliability.test_argument_types import BAD, VALID
from tests.reliability.test_bad_input_bounds import CONFIG

# Test seams (storage, store_factory) included: every keyword of open_memory.
OPEN_PARAMS = [p for p in inspect.signature(aiden.open_memory).parameters if p != "root"]


async def _opens_and_keeps(root: Path, content: str) -> None:
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        probe = await memory.append(SessionEvent(type="user_input", content=content))
        assert await memory.read_event(probe.seq) == probe


async def _refused_or_works(root: Any, **kwargs: Any) -> None:
    try:
        async with aiden.open_memory(root, **kwargs) as memory:
            await memory.append(SessionEvent(type="user_input", content="inside"))
    except aiden.AidenError:
        pass


@pytest.mark.anyio
@pytest.mark.parametrize("param", OPEN_PARAMS)
async def test_open_memory_refuses_a_wrong_keyword_and_the_root_opens_after(tmp_path: Path, param: str) -> None:
    for i, bad in enumerate(BAD):
        await _refused_or_works(tmp_path, **{param: bad})
        await _opens_and_keeps(tmp_path, f"after {param} #{i}")


@pytest.mark.anyio
@pytest.mark.parametrize("param", ["config", "summarizer", "storage", "embedder", "host"])
async def test_an_object_of_the_wrong_kind_is_refused_at_open_not_at_its_first_use(tmp_path: Path, param: str) -> None:
    for bad in BAD[1:]:  # all but None
        with pytest.raises(aiden.ConfigError, match=f"^open_memory: {param} must be"):
            async with aiden.open_memory(tmp_path, **{param: bad}):
                pass


@pytest.mark.anyio
async def test_open_memory_refuses_a_bad_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # "x" and "" are relative roots: under tmp_path
    for bad in BAD:
        await _refused_or_works(bad)
    (tmp_path / "a_file").write_text("x")
    await _opens_and_keeps(tmp_path / "other", "the other memory")
    for root in (
        tmp_path / "a_file",
        f"{tmp_path}/a\x00b",
        os.fsencode(tmp_path / "b"),
        f"{tmp_path}/\ud800",
        tmp_path / "other" / "memory",
        tmp_path / "other" / "memory" / "session",
    ):
        with pytest.raises(aiden.AidenError):
            async with aiden.open_memory(root) as memory:  # type: ignore[arg-type]
                pytest.fail(f"opened {root!r} as {memory.root}")
    assert not (tmp_path / "other" / "memory" / "memory").exists()
    await _opens_and_keeps(tmp_path / "other", "the other memory, after")


@pytest.mark.parametrize("field", sorted(aiden.Config.__struct_fields__))
def test_config_refuses_a_wrong_value(field: str) -> None:
    for bad in BAD:
        try:
            config = aiden.Config(**{field: bad})
        except aiden.AidenError:
            continue
        config.prompt_budget()  # accepted: usable


def test_config_window_and_mappings_refuse_a_wrong_value() -> None:
    for bad in BAD:
        for make in (aiden.Config().with_window, aiden.Config.for_window, aiden.config_from_mapping):
            try:
                make(bad).prompt_budget()
            except aiden.AidenError:
                pass
        for mapping in ({"context_window": bad}, {"experience_environment": bad}, {"\ud800": bad}):
            try:
                aiden.config_from_mapping(mapping).prompt_budget()
            except aiden.AidenError:
                pass


def test_load_config_refuses_a_bad_path_or_file(tmp_path: Path) -> None:
    contents = (b"\xff\xfe\x00x: 1\n", b"a: [", b"- 1\n", b"1: 2\n", b'context_window: "\\ud800"\n', b"#" * (2 << 20))
    for i, content in enumerate(contents):
        (tmp_path / f"{i}.yaml").write_bytes(content)
    paths = (*BAD, tmp_path, tmp_path / "missing", f"{tmp_path}/a\x00b", os.fsencode(tmp_path / "0.yaml"))
    for path in (*paths, *(tmp_path / f"{i}.yaml" for i in range(len(contents)))):
        with pytest.raises(aiden.ConfigError):
            aiden.load_config(path)


def test_a_malformed_dsn_is_refused_before_connecting_with_the_password_masked(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    for dsn in ("postgresql://u:secret@h/\ud800", "postgresql://u:secret@h:99999999/db", "host=h password=secret port=x"):
        for session_id in (None, "", "a/b", "\ud800", "ok"):
            with pytest.raises(aiden.AidenError) as info, aiden.sync.open_memory(tmp_path, store=dsn, session_id=session_id):
                pass
            assert "secret" not in str(info.value)


def _sync_methods() -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(aiden.sync.SyncMemory, callable)
        if not name.startswith("_")
        and name not in {"dream", "call"}  # dream: see test_argument_types; call's func is Python's TypeError
        and len(inspect.signature(member).parameters) > 1
    )


@pytest.mark.parametrize("method", _sync_methods())
def test_the_blocking_facade_refuses_like_memory_and_keeps_serving(tmp_path: Path, method: str) -> None:
    with aiden.sync.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        memory.append(SessionEvent(type="user_input", content="first"))
        params = [p for p in inspect.signature(getattr(aiden.sync.SyncMemory, method)).parameters.values()]
        params = [p for p in params if p.name != "self"]
        required = {p.name: VALID[p.name] for p in params if p.default is inspect.Parameter.empty}
        for param in params:
            for bad in BAD:
                try:
                    getattr(memory, method)(**{**required, param.name: bad})
                except aiden.AidenError:
                    pass
                probe = memory.append(SessionEvent(type="user_input", content=f"after {param.name}"))
                assert memory.read_event(probe.seq) == probe


def test_the_blocking_facade_refuses_a_wrong_keyword_like_open_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # "x" and "" are relative roots: under tmp_path
    for param in inspect.signature(aiden.sync.open_memory).parameters:
        for bad in BAD:
            try:
                with aiden.sync.open_memory(**{"root": tmp_path, param: bad}) as memory:
                    memory.append(SessionEvent(type="user_input", content="inside"))
            except aiden.AidenError:
                pass
    with aiden.sync.open_memory(tmp_path) as memory:
        assert memory.read_event(memory.append(SessionEvent(type="user_input", content="after")).seq)
    # Its loop thread stopped with its last memory, refused opens included.
    assert not [t for t in threading.enumerate() if t.name == "aiden-memory-loop"]

