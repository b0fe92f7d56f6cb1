"""``aiden doctor`` on the Dream version history (``long_term/.git``) and ``doctor --repair`` (#18 finding 1).

Each kind of damage is reported (exit 1), repaired, and afterwards doctor is
clean, Dream commits again and ``dream_log`` lists what survives: the demo's
version when the objects were intact, else the repair's fresh start.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.cli import main
from aiden.events import SessionEvent
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.gitstore import Version
from tests.cli.conftest import DemoRoot
from tests.cli.guard import read_only_root
from tests.cli.test_cli import CLEAN_DOCTOR

pytestmark = pytest.mark.timeout(120)


def _git(root: Path) -> Path:
    return root / "memory/long_term/.git"


def _doctor(capsys: pytest.CaptureFixture[str], root: Path, *flags: str) -> tuple[int, dict[str, object]]:
    code = main(["doctor", str(root), "--json", *flags])
    out = capsys.readouterr()
    assert out.err == ""
    return code, json.loads(out.out)


def _dream_again(root: Path) -> tuple[DreamOutcome, list[Version]]:
    """New history (a compaction of new events), then Dream over it: its outcome and the log after."""

    async def run() -> tuple[DreamOutcome, list[Version]]:
        async with aiden.open_memory(root) as memory:
            for n in range(30):
                await memory.append(
                    SessionEvent(
                        type="user_input", role="user", content=f"the release checklist item {n} uses tox"
                    )
                )
            assert (await memory.maintain(manual=True)).compacted
            outcome = await memory.dream()
            return outcome, await memory.dream_log()

    return anyio.run(run)


def _bad_ref(git: Path) -> None:
    (git / "refs/heads/main").write_text("zzzz\n")


def _no_head(git: Path) -> None:
    (git / "HEAD").unlink()


def _empty_ref(git: Path) -> None:
    (git / "refs/heads/main").write_bytes(b"")


def _unknown_ref(git: Path) -> None:
    (git / "refs/heads/main").write_text("1" * 40 + "\n")


OUT_OF_REACH = (
    "long_term/.git: 1 version is stored out of dream_log's reach; "
    "the next Dream would start a new history without them"
)


@pytest.mark.parametrize(
    ("damage", "found"),
    [
        (_bad_ref, ["long_term/.git: refs/heads/main holds 'zzzz', not a commit id", OUT_OF_REACH]),
        (_no_head, ["long_term/.git/HEAD is missing", OUT_OF_REACH]),
        (_empty_ref, ["long_term/.git: refs/heads/main is missing or empty", OUT_OF_REACH]),
        (_unknown_ref, [f"long_term/.git: HEAD ({'1' * 40}) is missing or unreadable"]),
    ],
    ids=["bad ref", "missing HEAD", "emptied ref", "ref to nothing"],
)
def test_a_damaged_ref_is_reported_and_pointed_back_at_the_newest_version(
    demo: DemoRoot,
    root: Path,
    damage: Callable[[Path], None],
    found: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    damage(_git(root))
    assert _doctor(capsys, root) == (1, {**CLEAN_DOCTOR, "ok": False, "problems": found})
    (dreamed,) = demo.versions
    assert _doctor(capsys, root, "--repair") == (
        0,
        {
            "repaired": [
                f"pointed HEAD (refs/heads/main) at the newest readable version {dreamed.commit_id[:12]}"
            ],
            **CLEAN_DOCTOR,
        },
    )
    assert _doctor(capsys, root) == (0, CLEAN_DOCTOR)
    outcome, log = _dream_again(root)
    assert outcome.ran and outcome.commit_id is not None
    assert [v.commit_id for v in log] == [outcome.commit_id, dreamed.commit_id]


def _flip_pack_byte(git: Path) -> None:
    (pack,) = (git / "objects/pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))


def test_flipped_object_bytes_move_the_history_aside_and_start_afresh(
    demo: DemoRoot, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git = _git(root)
    (pack,) = (git / "objects/pack").glob("*.pack")
    _flip_pack_byte(git)
    data = pack.read_bytes()
    code, result = _doctor(capsys, root)
    problems = result.pop("problems")
    assert (code, result) == (1, {k: v for k, v in CLEAN_DOCTOR.items() if k != "problems"} | {"ok": False})
    (dreamed,) = demo.versions
    assert isinstance(problems, list)
    assert problems[0] == (
        "long_term/.git: a pack fails its check: ChecksumMismatch: Checksum mismatch: "
        f"Expected {data[-20:].hex()}, got {hashlib.sha1(data[:-20]).hexdigest()}"
    )
    assert problems[-1] == f"long_term/.git: HEAD ({dreamed.commit_id}) is missing or unreadable"
    _assert_started_afresh(root, capsys, damaged=data)


def test_missing_objects_move_the_history_aside_and_start_afresh(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git = _git(root)
    shutil.rmtree(git / "objects")
    assert _doctor(capsys, root) == (
        1,
        {
            **CLEAN_DOCTOR,
            "ok": False,
            "problems": [
                "long_term/.git is not a usable git repository: NotGitRepository: "
                f"No git repository was found at {git}"
            ],
        },
    )
    _assert_started_afresh(root, capsys, damaged=None)


def _assert_started_afresh(root: Path, capsys: pytest.CaptureFixture[str], *, damaged: bytes | None) -> None:
    long_term = root / "memory/long_term"
    code, result = _doctor(capsys, root, "--repair")
    (aside,) = [p.name for p in long_term.iterdir() if p.name.startswith(".git.damaged-")]
    message = f"repair: a new version history from the current long-term files (the damaged one is {aside})"
    log = _log(root)
    assert [v.message for v in log] == [message]
    assert (code, result) == (
        0,
        {
            "repaired": [
                f"moved the damaged long_term/.git to long_term/{aside}; "
                "its version history is lost to dream_log and restore",
                f"started a new version history from the current long-term files ({log[0].commit_id[:12]})",
            ],
            **CLEAN_DOCTOR,
            "notes": [f"long_term/{aside} holds a damaged version history an earlier repair set aside"],
        },
    )
    if damaged is not None:  # kept for a person to inspect, byte for byte
        (pack,) = (long_term / aside / "objects/pack").glob("*.pack")
        assert pack.read_bytes() == damaged
    outcome, after = _dream_again(root)
    assert outcome.ran and outcome.commit_id is not None
    assert [v.commit_id for v in after] == [outcome.commit_id, log[0].commit_id]
    assert _doctor(capsys, root)[0] == 0


def _log(root: Path) -> list[Version]:
    async def run() -> list[Version]:
        async with aiden.open_memory(root) as memory:
            return await memory.dream_log()

    return anyio.run(run)


def test_a_history_cut_off_by_an_emptied_ref_is_found_and_joined_back(
    demo: DemoRoot, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _empty_ref(_git(root))
    # Today's behaviour: a new root commit (the files as found, then the run), the demo's version gone.
    outcome, log = _dream_again(root)
    assert outcome.commit_id is not None
    assert [v.title for v in log[1:]] == ["snapshot: long-term files before the first Dream"]
    assert log[0].commit_id == outcome.commit_id
    (dreamed,) = demo.versions
    assert _doctor(capsys, root) == (
        1,
        {
            **CLEAN_DOCTOR,
            "ok": False,
            "problems": [
                f"long_term/.git: 1 version is (newest {dreamed.commit_id[:12]}) not reachable from HEAD: "
                "the history was cut off and restarted 2 versions ago"
            ],
        },
    )
    code, result = _doctor(capsys, root, "--repair")
    joined = _log(root)
    assert (code, result) == (
        0,
        {
            "repaired": [
                "joined the 2 versions made after the cut back onto the earlier history; "
                f"HEAD is {joined[0].commit_id[:12]}"
            ],
            **CLEAN_DOCTOR,
        },
    )
    assert joined[2:] == [dreamed]
    assert [(v.message, v.timestamp) for v in joined[:2]] == [(v.message, v.timestamp) for v in log]


def test_repair_on_a_read_only_root_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _empty_ref(_git(root))
    with read_only_root(root, monkeypatch):  # and nothing under it changed (checked on exit)
        code = main(["doctor", str(root), "--repair"])
        out = capsys.readouterr()
        assert _doctor(capsys, root)[0] == 1  # the check alone still works there
    assert (code, out.out) == (1, "")
    assert out.err.startswith(f"aiden doctor: memory root {str(root)!r} is not writable: ")
    assert out.err.count("\n") == 1


def test_repair_text_output_and_a_sound_root(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(root), "--repair"]) == 0
    assert capsys.readouterr().out == "ok\n"
    _no_head(_git(root))
    assert main(["doctor", str(root)]) == 1
    assert capsys.readouterr().out == f"long_term/.git/HEAD is missing\n{OUT_OF_REACH}\n"
