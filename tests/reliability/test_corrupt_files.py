"""Corrupt files: seeded mutations of index.yaml, summary.md, chunk files, segment files and middle
lines of events.jsonl, plus hostile YAML (python tags, alias bombs, deep nesting).

Opening never crashes, nothing executes (a payload would create a marker file), the index is rebuilt
from chunk files, every loss is reported in ``memory.recovery.unrecoverable`` (none silent), and what
is recoverable is recovered: index, segment and summary damage cost no event at all; a damaged chunk
costs at most its own events; a damaged hot-window line at most its own event.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import anyio
import pytest

from aiden.storage.layout import Layout
from tests.reliability.corruption import (
    Outcome,
    build_base,
    chunk_files,
    chunk_seqs,
    fresh_copy,
    judge,
    mutate_events_line,
    mutate_file,
    segment_files,
    yaml_payloads,
)
from tests.reliability.harness import report

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, str]]:
    root = tmp_path_factory.mktemp("corrupt-base") / "root"
    root.mkdir()
    seqs = anyio.run(build_base, root)
    assert segment_files(root), "the base session must have a sealed segment"
    return root, seqs


def _summarize(title: str, outcomes: list[Outcome]) -> None:
    report(
        title,
        inputs_tried=len(outcomes),
        crashes=sum(1 for o in outcomes if o.crashed),
        code_executed=sum(o.code_executed for o in outcomes),
        events_lost=sum(len(o.lost) for o in outcomes),
        silent_losses=sum(o.silent for o in outcomes),
        unexpected_losses=sum(bool(o.unexpected_loss) for o in outcomes),
        duplicated=sum(o.duplicated for o in outcomes),
        reported=sum(bool(o.reported) for o in outcomes),
        second_recovery_changed=sum(o.second_changed for o in outcomes),
        slowest_open_s=round(max((o.seconds for o in outcomes), default=0.0), 3),
    )


def _assert_sound(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        assert not o.crashed, f"{o.description}: open crashed: {o.crashed}"
        assert not o.code_executed, f"{o.description}: payload executed"
        assert o.append_ok, f"{o.description}: append after recovery failed"
        assert not o.silent, f"{o.description}: lost seqs {sorted(o.lost)[:10]} without a report"
        assert not o.unexpected_loss, f"{o.description}: recoverable seqs lost {sorted(o.unexpected_loss)[:10]}"
        assert o.duplicated == 0, f"{o.description}: {o.duplicated} duplicated seqs"
        assert not o.second_changed, f"{o.description}: second recovery changed something"


def _count(full_run: bool, ci: int, full: int) -> int:
    return full if full_run else ci


async def test_hostile_yaml_in_index(tmp_path: Path, base: tuple[Path, dict[int, str]]) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    outcomes = []
    for name, payload in yaml_payloads(marker).items():
        root = fresh_copy(base_root, tmp_path / name)
        Layout(root).index.write_bytes(payload)
        outcomes.append(await judge(root, seqs, marker, f"index.yaml {name}", set()))
    _summarize("corrupt index.yaml (hostile YAML)", outcomes)
    _assert_sound(outcomes)


@pytest.mark.seeds(ci=1, full=4)
async def test_index_yaml_mutations(tmp_path: Path, base: tuple[Path, dict[int, str]], seed: int, full_run: bool) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    rng = random.Random(f"index/{seed}")
    outcomes = []
    for i in range(_count(full_run, 8, 30)):
        kind = ["truncate", "garbage", "invalid-utf8", "zeros", "bitflip"][i % 5]
        root = fresh_copy(base_root, tmp_path / f"m{i}")
        description = mutate_file(Layout(root).index, rng, kind)
        outcomes.append(await judge(root, seqs, marker, description, set()))
    _summarize(f"corrupt index.yaml (seeded mutations, seed {seed})", outcomes)
    _assert_sound(outcomes)


@pytest.mark.seeds(ci=1, full=4)
async def test_summary_md_mutations(tmp_path: Path, base: tuple[Path, dict[int, str]], seed: int, full_run: bool) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    rng = random.Random(f"summary/{seed}")
    outcomes = []
    for i in range(_count(full_run, 6, 24)):
        kind = ["bitflip", "truncate", "garbage", "invalid-utf8", "delete", "zeros"][i % 6]
        root = fresh_copy(base_root, tmp_path / f"m{i}")
        description = mutate_file(Layout(root).summary, rng, kind)
        o = await judge(root, seqs, marker, description, set())
        outcomes.append(o)
        assert Layout(root).summary.read_bytes() == Layout(base_root).summary.read_bytes(), (
            f"{description}: summary.md was not re-derived"
        )
    _summarize(f"corrupt summary.md (seed {seed})", outcomes)
    _assert_sound(outcomes)


@pytest.mark.seeds(ci=1, full=4)
async def test_chunk_file_mutations(tmp_path: Path, base: tuple[Path, dict[int, str]], seed: int, full_run: bool) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    rng = random.Random(f"chunk/{seed}")
    outcomes = []
    for i in range(_count(full_run, 8, 30)):
        kind = ["bitflip", "truncate", "garbage", "delete", "zeros", "invalid-utf8"][i % 6]
        root = fresh_copy(base_root, tmp_path / f"m{i}")
        # Alternate between a chunk referenced from the sealed segment and a live one.
        files = chunk_files(root)
        target = files[rng.randrange(0, 32)] if i % 2 == 0 else files[-1 - rng.randrange(0, 2)]
        own = chunk_seqs(target)
        description = mutate_file(target, rng, kind)
        o = await judge(root, seqs, marker, description, own)
        outcomes.append(o)
    _summarize(f"corrupt chunk files (seed {seed})", outcomes)
    _assert_sound(outcomes)


@pytest.mark.seeds(ci=1, full=4)
async def test_segment_file_mutations(tmp_path: Path, base: tuple[Path, dict[int, str]], seed: int, full_run: bool) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    rng = random.Random(f"segment/{seed}")
    outcomes = []
    for i in range(_count(full_run, 5, 20)):
        kind = ["bitflip", "truncate", "garbage", "delete", "zeros"][i % 5]
        root = fresh_copy(base_root, tmp_path / f"m{i}")
        description = mutate_file(segment_files(root)[0], rng, kind)
        o = await judge(root, seqs, marker, description, set())
        outcomes.append(o)
        assert o.reported, f"{description}: not reported"
    _summarize(f"corrupt segment files (seed {seed})", outcomes)
    _assert_sound(outcomes)


@pytest.mark.seeds(ci=1, full=4)
async def test_events_middle_line_mutations(
    tmp_path: Path, base: tuple[Path, dict[int, str]], seed: int, full_run: bool
) -> None:
    base_root, seqs = base
    marker = tmp_path / "PWNED"
    rng = random.Random(f"events/{seed}")
    outcomes = []
    for i in range(_count(full_run, 10, 40)):
        kind = ["bitflip", "invalid-utf8", "garbage", "nul", "merged"][i % 5]
        root = fresh_copy(base_root, tmp_path / f"m{i}")
        description, affected = mutate_events_line(Layout(root).session, rng, marker, kind)
        outcomes.append(await judge(root, seqs, marker, description, affected))
    _summarize(f"corrupt events.jsonl middle lines (seed {seed})", outcomes)
    _assert_sound(outcomes)


# --------------------------------------------------------------------------
# damaged seqs and semantically damaged index entries (regressions + one open bug)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["digit-flip", "key-flip"])
async def test_damaged_seq_in_events_is_not_lost_silently(
    tmp_path: Path, base: tuple[Path, dict[int, str]], damage: str
) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): a damaged seq in a middle events.jsonl
    line is not detected: (1) a digit flip makes it a duplicate of another seq and SessionStore._recover
    drops one line as a 'duplicate' (duplicate_events_dropped, nothing in unrecoverable, nothing
    quarantined); (2) a damaged \"seq\" key is ignored as an unknown field, the line decodes with the
    default seq=0 and is kept silently, out of order (jsonl.scan / events.decode_event accept it)
    """
    base_root, seqs = base
    root = fresh_copy(base_root, tmp_path / damage)
    path = Layout(root).events
    lines = path.read_bytes().splitlines(keepends=True)
    m = re.search(rb'"seq":(\d+)', lines[3])
    assert m is not None
    seq = int(m.group(1))
    if damage == "digit-flip":  # seq N -> N xor 1 (one bit): the line now claims its neighbour's seq
        lines[3] = lines[3][: m.start(1)] + str(seq ^ 1).encode() + lines[3][m.end(1) :]
    else:  # "seq" -> "sdq" (one bit)
        lines[3] = lines[3][: m.start(0) + 2] + b"d" + lines[3][m.start(0) + 3 :]
    path.write_bytes(b"".join(lines))
    o = await judge(root, seqs, tmp_path / "PWNED", f"seq {seq} {damage}", {seq, seq ^ 1})
    report(f"damaged seq in events.jsonl ({damage})", lost=sorted(o.lost), reported=o.reported)
    assert not o.silent, f"lost {sorted(o.lost)} silently"


async def test_semantic_index_damage_is_detected_and_rebuilt(tmp_path: Path, base: tuple[Path, dict[int, str]]) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): SessionStore._recover trusts index.yaml
    entries without checking them against the chunk files: a valid-YAML index whose newest entry's
    last_seq was bumped (e.g. a bit flip 0->4 in a digit) makes recovery drop hot-window events it
    believes covered (hot_events_dropped) — silent loss — and a flipped sha256 makes an intact chunk
    unreadable instead of triggering a rebuild from chunk files
    """
    base_root, seqs = base
    outcomes = []
    # (1) the newest live entry claims 3 more seqs than its chunk holds
    root = fresh_copy(base_root, tmp_path / "range")
    index = Layout(root).index
    text = index.read_text()
    last = max(int(x) for x in re.findall(r"last_seq: (\d+)", text))
    index.write_text(text.replace(f"last_seq: {last}\n", f"last_seq: {last + 3}\n"))
    outcomes.append(await judge(root, seqs, tmp_path / "PWNED", "index last_seq +3", set()))
    # (2) one hex digit of a live entry's sha256 changed
    root = fresh_copy(base_root, tmp_path / "sha")
    index = Layout(root).index
    text = index.read_text()
    m = re.findall(r"sha256: ([0-9a-f]{64})", text)[-1]
    index.write_text(text.replace(m, ("0" if m[0] != "0" else "1") + m[1:]))
    outcomes.append(await judge(root, seqs, tmp_path / "PWNED", "index sha256 digit", set()))
    _summarize("semantic index damage", outcomes)
    for o in outcomes:
        assert not o.lost, f"{o.description}: lost {sorted(o.lost)[:10]} (reported: {o.reported})"


@pytest.mark.parametrize("target", ["digit-into-chunk", "far-into-chunk"])
async def test_seq_damaged_into_a_chunk_range_is_not_dropped_silently(
    tmp_path: Path, base: tuple[Path, dict[int, str]], target: str
) -> None:
    base_root, seqs = base
    root = fresh_copy(base_root, tmp_path / target)
    path = Layout(root).events
    lines = path.read_bytes().splitlines(keepends=True)
    m = re.search(rb'"seq":(\d+)', lines[3])
    assert m is not None
    seq = int(m.group(1))
    digits = str(seq)
    # '4' (0x34) -> '0' (0x30) is one bit; otherwise jump far back into the first chunk.
    new = int(digits.replace("4", "0", 1)) if target == "digit-into-chunk" and "4" in digits else 5
    assert new < seq and new in seqs
    lines[3] = lines[3][: m.start(1)] + str(new).encode() + lines[3][m.end(1) :]
    path.write_bytes(b"".join(lines))
    o = await judge(root, seqs, tmp_path / "PWNED", f"seq {seq} -> {new}", {seq})
    report(f"seq damaged into a chunk range ({target})", lost=sorted(o.lost), reported=o.reported)
    assert not o.silent, f"lost {sorted(o.lost)} silently"
