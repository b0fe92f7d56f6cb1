"""First ``recall_experience`` after a reopen, with and without the records' vectors file.

A memory opened with an embedder ranks experience records by BM25 fused with
their vector similarity. Their vectors are kept in
``experience/vectors.msgpack``; without that file, the first recall after an
open embeds every applicable record, blocking the experience actor (and the
caller) meanwhile. This measures that first recall on a root of 8 records
for each of ``--components`` components of one environment (each record a
title and a short body like the learned ones; a recall embeds the records
of its environment, so all of them here), with ``aiden.LocalMiniLMEmbedder``,
in ``--repeats`` paired repeats:

* ``no file``: the file deleted, the memory opened, the first recall timed
  (it embeds the records, then writes the file);
* ``file``: the memory reopened on that file, the first recall timed
  (it embeds the query only).

The model is loaded (and warmed by one call) before any timing; opening the
memory is not timed, the recall call through ``handle_tool_call`` is.
Reported: medians (min-max) and the paired ratio no file / file.

    python benchmarks/bench_experience_vectors.py [--components 13] [--repeats 3]

Results: ``benchmarks/results/experience_vectors.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import describe, machine, paired, summarize, write_result

import aiden
from aiden.experience.records import ExperienceRecord, RecordKind
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

NAMES = [
    "acme",
    "bolt",
    "cedar",
    "delta",
    "ember",
    "flint",
    "grove",
    "heron",
    "iris",
    "juno",
    "kite",
    "lumen",
    "moss",
]
# (kind, goal, step, body) per environment: 8 records, as a learned environment holds.
TASKS: list[tuple[RecordKind, str, str, str]] = [
    (
        "procedure",
        "build the {e} repo",
        "make build WITH_SSL=1",
        "`make build` fails until `WITH_SSL=1` is passed",
    ),
    (
        "failure",
        "build the {e} repo",
        "make build",
        "fails with `missing flag WITH_SSL`; use `make build WITH_SSL=1`",
    ),
    (
        "procedure",
        "start the {e} server",
        "API_KEY=dev ./serve",
        "the server refuses to start until `API_KEY` is set",
    ),
    ("failure", "start the {e} server", "./serve", "exits with `API_KEY not set`; set it first"),
    (
        "procedure",
        "run the {e} tests",
        "PYTHONPATH=src pytest",
        "imports fail unless `PYTHONPATH=src` is set",
    ),
    ("procedure", "lint the {e} code", "ruff check .", "works the first time"),
    (
        "navigation",
        "find the {e} cache settings",
        "cat config/cache.toml",
        "the cache settings are in `config/cache.toml`",
    ),
    (
        "procedure",
        "deploy {e} to staging",
        "./deploy.sh staging",
        "deploys in about two minutes; watch the health check",
    ),
]
QUERY = "how do I get the {e} project to compile"
ENV = "platform"


def records(components: int) -> list[ExperienceRecord]:
    out: list[ExperienceRecord] = []
    for env in NAMES[:components]:
        for n, (kind, goal, step, body) in enumerate(TASKS):
            t = float(len(out) + 1)
            out.append(
                ExperienceRecord(
                    id=f"{kind[:4]}-{env}-{n}",
                    kind=kind,
                    status="active",
                    title=f"{goal.format(e=env)}: `{step}`",
                    body=body,
                    environment=ENV,
                    goal=goal.format(e=env),
                    step=f"shell {step}",
                    created_at=t,
                    updated_at=t,
                )
            )
    return out


async def first_recall_s(root: Path, embedder: aiden.LocalMiniLMEmbedder, env: str) -> float:
    config = aiden.Config(idle_compact_after_minutes=0, session_summary_on_close=False)
    async with aiden.open_memory(root, config=config, embedder=embedder) as memory:
        args = {"query": QUERY.format(e=env), "environment": ENV}
        t0 = time.perf_counter()
        text = await memory.handle_tool_call("recall_experience", args)
        elapsed = time.perf_counter() - t0
        assert json.loads(text)["results"], text
    return elapsed


async def main_async(components: int, repeats: int, root: Path) -> dict[str, Any]:
    layout = Layout(root)
    rows = records(components)
    RecordStore(layout, Storage()).apply(rows)  # learned earlier, by a memory without an embedder
    embedder = aiden.LocalMiniLMEmbedder()
    embedder.embed(["warm the model up"])
    cold: list[float] = []
    warm: list[float] = []
    for r in range(repeats):
        env = NAMES[r % components]
        layout.experience_vectors.unlink(missing_ok=True)
        cold.append(await first_recall_s(root, embedder, env))
        assert layout.experience_vectors.stat().st_size > len(rows) * 384 * 8  # every record's vector
        warm.append(await first_recall_s(root, embedder, env))
    return {
        "records": len(rows),
        "repeats": repeats,
        "file_bytes": layout.experience_vectors.stat().st_size,
        "no_file_ms": summarize([s * 1e3 for s in cold]),
        "file_ms": summarize([s * 1e3 for s in warm]),
        "no_file_over_file": paired(cold, warm),
        "machine": machine(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--components", type=int, default=13, help=f"1-{len(NAMES)}, 8 records each")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not 1 <= args.components <= len(NAMES):
        parser.error(f"--components must be between 1 and {len(NAMES)}")
    with tempfile.TemporaryDirectory() as tmp:
        result = anyio.run(main_async, args.components, args.repeats, Path(tmp))
    path = write_result("experience_vectors", result)
    c, w, ratio = result["no_file_ms"], result["file_ms"], result["no_file_over_file"]
    print(describe(result["machine"]))
    print(
        f"{result['records']} records, vectors file {result['file_bytes']:,} bytes, {result['repeats']} repeats"
    )
    print(f"first recall after reopen, no file: {c['median']:,.0f} ms ({c['min']:,.0f}-{c['max']:,.0f})")
    print(f"first recall after reopen, file:    {w['median']:,.0f} ms ({w['min']:,.0f}-{w['max']:,.0f})")
    print(f"no file / file: {ratio['median']:.1f}x ({ratio['min']:.1f}-{ratio['max']:.1f})")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
