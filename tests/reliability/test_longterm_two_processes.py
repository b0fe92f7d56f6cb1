"""Two processes on one root doing long-term work at once ([Reliability] finding 4, end to end).

Each process (``child.py ltworker``) appends, compacts (every committed chunk
records one history entry), saves memories through the ``save_memory`` tool,
forgets some through ``forget_memory`` and runs Dream, all interleaved with the
other process. Afterwards: history cursors unique and strictly increasing in
file order, one history record per compacted chunk, the Dream cursor within the
history, every saved-and-not-forgotten memory in the index and on disk and
nothing else, every acknowledged session event once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml

from tests.reliability.harness import ForkServer, check, read_root, report, spawn_child


def test_two_processes_save_forget_dream_and_record_history_at_once(
    tmp_path: Path, fork_server: ForkServer | None
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    count = 12
    children = [
        spawn_child(fork_server, ["ltworker", str(root), f"p{k}", str(count)], tmp_path, f"p{k}")
        for k in (0, 1)
    ]
    rcs = [c.wait(180) for c in children]
    assert rcs == [0, 0], [c.stderr()[-2000:] for c in children]
    saved: set[str] = set()
    forgotten: set[str] = set()
    forget_answers: list[str] = []
    acked: dict[str, int] = {}
    attempted: set[str] = set()
    for child in children:
        log = child.output()
        acked.update(log.acked)
        attempted |= log.intents
        for line in log.lines:
            kind, _, rest = line.partition(" ")
            if kind == "S":
                saved.add(rest)
            elif kind == "F":
                ident, _, answer = rest.partition(" ")
                forgotten.add(ident)
                forget_answers.append(answer)
    lt = root / "memory" / "long_term"
    records = [json.loads(line) for line in (lt / "history.jsonl").read_text().splitlines() if line.strip()]
    cursors = [r["cursor"] for r in records]
    per_chunk = Counter(r.get("chunk_id") for r in records if r.get("chunk_id"))
    index = yaml.safe_load((lt / "index.yaml").read_text())
    indexed = {e["id"] for e in index["entries"]}
    on_disk = {p.stem for p in (lt / "memories").glob("*.md")}
    dream_cursor = int((lt / ".dream_cursor").read_text().strip() or 0)
    chunk_ids = {e.chunk_id for view in read_root(root) for e in view.entries}
    verdict = check(root, acked, attempted)
    report(
        "two processes, long-term work",
        history_records=len(records),
        chunks=len(chunk_ids),
        saved=len(saved),
        forgotten=len(forgotten),
        dream_cursor=dream_cursor,
        **verdict.figures(),
    )
    assert len(saved) == 2 * count and len(forgotten) == 2 * (count // 3)
    assert all('"error"' not in a for a in forget_answers), forget_answers
    assert cursors == sorted(set(cursors)), "duplicate or out-of-order history cursors"
    assert [c for c, n in per_chunk.items() if n > 1] == []
    assert set(per_chunk) == chunk_ids  # every compacted chunk recorded once, nothing else
    assert 0 < dream_cursor <= max(cursors)
    assert indexed == saved - forgotten
    assert on_disk == saved - forgotten
    assert verdict.ok, verdict.explain()
