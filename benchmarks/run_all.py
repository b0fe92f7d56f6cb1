"""Run every benchmark, then write the summary table, the targets table and the plot.

Each benchmark runs in its own fresh interpreter (``--quick`` is passed
through), writes ``benchmarks/results/<name>.json`` and prints its markdown
table; a failing benchmark is reported and the others still run. Then:

- ``results/append.png``: throughput and latency against concurrency (plot.py);
- ``results/summary.md``: the machine, every table, and every target with its
  measured value and MET / MISSED;
- ``results/summary.json``: targets, timings and failures;
- with ``--write-doc``: the generated section of ``BENCHMARKS.md`` is replaced
  by ``summary.md`` (the prose around it is kept).

    python benchmarks/run_all.py [--quick] [--only append,peer] [--skip peer] [--write-doc]
    python benchmarks/run_all.py --summary-only [--write-doc]   # rebuild from results/*.json

(``nox -s bench`` runs this.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import RESULTS, describe, machine, table  # noqa: E402

# (name, script, title). bench_policy.py and bench_recall.py belong to other
# owners: they are only run here, with --quick passed through.
BENCHES: list[tuple[str, str, str]] = [
    ("append", "bench_append.py", "1. Concurrent durable appends"),
    ("compaction", "bench_compaction.py", "2-3. Appends during compaction; compaction cost vs history"),
    ("recall", "bench_recall.py", "4. Recall latency vs chunks"),
    ("recall_quality", "bench_recall_quality.py", "4b. Recall quality vs plain BM25"),
    ("footprint", "bench_footprint.py", "5. Footprint: peak RSS over a long session; import time"),
    ("peer", "bench_peer.py", "6. Peer: nanobot-ai on the same workloads"),
    ("messages", "bench_messages.py", "7. Message overhead of one actor hop"),
    ("policy", "bench_policy.py", "Policy: token estimator and planner"),
]
DOC = ROOT / "BENCHMARKS.md"
BEGIN = "<!-- BEGIN GENERATED: benchmarks/run_all.py --write-doc -->"
END = "<!-- END GENERATED -->"


def run_bench(name: str, script: str, quick: bool, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / script), *(["--quick"] if quick else [])]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    print(f"[run_all] {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT), check=False)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -1, str(exc.stdout or ""), f"timed out after {timeout:.0f} s"
    seconds = time.perf_counter() - t
    if rc == 0:
        # Kept so --summary-only can rebuild the summary of benchmarks without a "table" in their JSON.
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.out.md").write_text(out)
    status = "ok" if rc == 0 else f"FAILED (exit {rc})"
    print(f"[run_all] {name}: {status} in {seconds:.0f} s", file=sys.stderr, flush=True)
    if rc != 0:
        print(err[-3000:], file=sys.stderr)
    return {"name": name, "rc": rc, "seconds": seconds, "stdout": out, "stderr_tail": err[-3000:]}


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, json.JSONDecodeError):
        return None


def _printed_tables(stdout: str) -> str:
    """The markdown a benchmark printed, without its trailing 'written/wrote/results:' lines,
    its headings nested under this summary's section headings."""
    keep = []
    for ln in stdout.splitlines():
        if ln.startswith(("written ", "wrote ", "results: ")):
            continue
        if ln.startswith("#"):
            level = len(ln) - len(ln.lstrip("#"))
            ln = "#" * min(6, level + 2) + ln[level:]
        keep.append(ln)
    return "\n".join(keep).strip()


def _recall_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    sizes = data.get("sizes") or []
    if not sizes:
        return []
    big = max(sizes, key=lambda s: s["size"])
    p99 = float(big["latency"]["p99_ms"])
    goal = float(data.get("target_p99_ms", 5.0))
    return [{
        "name": f"recall p99 at {big['size']:,} chunks",
        "goal": f"<= {goal:g} ms",
        "value": p99,
        "met": p99 <= goal,
        "measured": f"{p99:.2f} ms (p50 {big['latency']['p50_ms']:.2f} ms)",
        "note": "" if big["size"] >= 100_000 else "quick run: 100k chunks not measured",
    }]


def build_summary(results: Path = RESULTS, runs: list[dict[str, Any]] | None = None,
                  quick: bool = False, machine_info: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Assemble summary.md text and summary.json data from the result files (and captured stdout)."""
    runs = runs or []
    by_name = {r["name"]: r for r in runs}
    targets: list[dict[str, Any]] = []
    sections: list[str] = []
    for name, script, title in BENCHES:
        data = _load(results, name)
        run = by_name.get(name)
        body = ""
        if run is not None and run["rc"] != 0:
            body = f"**{script} failed** (exit {run['rc']}):\n\n```\n{run['stderr_tail'][-1500:]}\n```"
        elif data is not None and isinstance(data.get("table"), str):
            body = data["table"]
        elif run is not None and run.get("stdout", "").strip():
            body = _printed_tables(run["stdout"])
        elif (results / f"{name}.out.md").exists():
            body = _printed_tables((results / f"{name}.out.md").read_text())
        elif data is None:
            continue
        else:
            body = f"(see results/{name}.json)"
        if data is not None:
            if name == "recall":
                targets += _recall_targets(data)
            else:
                targets += data.get("targets", [])
            if data.get("error"):
                body = f"**Not measured:** {data['error']}\n\n" + body
        if name == "footprint":
            extra = _load(results, "footprint_1m")
            if extra is not None:
                when = extra.get("machine", {}).get("date", "?")
                targets += [{**t, "note": f"separate run, {when}"}
                            for t in extra.get("targets", []) if t["name"].startswith("peak RSS")]
                body += (f"\n\nSeparate run (`bench_footprint.py --sizes "
                         f"{','.join(extra.get('replay', {}))} --out footprint_1m`, {when}):\n\n"
                         f"{extra.get('table_replay', '')}")
        took = f" ({run['seconds']:.0f} s)" if run is not None and "seconds" in run else ""
        sections.append(f"### {title}{took}\n\n{body}")
    m = machine_info or machine()
    rows = [
        [t["name"], t["goal"], t["measured"], "MET" if t["met"] else "**MISSED**", t.get("note", "")]
        for t in targets
    ]
    head = [
        f"Run {'--quick' if quick else 'full'} on {describe(m)}",
        "",
        "Every figure is a median over repeats (min-max in parentheses) and every ratio is against "
        "a baseline measured in the same run; percentiles pool the samples of all repeats.",
        "",
        "### Targets",
        "",
        table(["target", "goal", "measured", "verdict", "note"], rows) if rows else "(no targets recorded)",
        "",
    ]
    png = results / "append.png"
    if png.exists():
        shown = png.relative_to(ROOT) if png.is_relative_to(ROOT) else png
        head += [f"Plot: `{shown}` (throughput and latency against concurrency).", ""]
    text = "\n".join(head) + "\n" + "\n\n".join(sections) + "\n"
    summary = {
        "machine": m,
        "quick": quick,
        "targets": targets,
        "runs": [{k: v for k, v in r.items() if k != "stdout"} for r in runs],
    }
    return text, summary


def write_doc(summary_md: str, doc: Path = DOC) -> None:
    """Replace the generated section of BENCHMARKS.md (between the markers) with ``summary_md``."""
    text = doc.read_text() if doc.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    pre, rest = text.split(BEGIN, 1)
    _, post = rest.split(END, 1)
    doc.write_text(f"{pre}{BEGIN}\n\n{summary_md.strip()}\n\n{END}{post}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="quick variants of every benchmark")
    parser.add_argument("--only", default="", help="comma-separated benchmark names to run")
    parser.add_argument("--skip", default="", help="comma-separated benchmark names to skip")
    parser.add_argument("--write-doc", action="store_true", help="update the generated section of BENCHMARKS.md")
    parser.add_argument("--timeout", type=float, default=1800, help="per-benchmark timeout, seconds")
    parser.add_argument("--summary-only", action="store_true",
                        help="run nothing: rebuild the summary (and plot) from the result files")
    args = parser.parse_args()
    only = {x for x in args.only.split(",") if x}
    skip = {x for x in args.skip.split(",") if x}
    known = {b[0] for b in BENCHES}
    if unknown := (only | skip) - known:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {sorted(known)}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    previous_path = RESULTS / "summary.json"
    previous = json.loads(previous_path.read_text()) if args.summary_only and previous_path.exists() else {}
    runs = previous.get("runs", []) if args.summary_only else [
        run_bench(name, script, args.quick, args.timeout)
        for name, script, _ in BENCHES
        if (not only or name in only) and name not in skip
    ]
    from plot import plot

    png = plot(RESULTS)
    if previous:
        text, summary = build_summary(RESULTS, runs, previous.get("quick", False), previous.get("machine"))
        summary["total_seconds"] = previous.get("total_seconds")
    else:
        text, summary = build_summary(RESULTS, runs, args.quick)
        summary["total_seconds"] = time.perf_counter() - t0
    summary["plot"] = str(png) if png else None
    (RESULTS / "summary.md").write_text(text)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(text)
    print(f"[run_all] total {summary['total_seconds'] or 0:.0f} s; written {RESULTS / 'summary.md'}, "
          f"{RESULTS / 'summary.json'}" + (f", {png}" if png else ""), file=sys.stderr)
    if args.write_doc:
        write_doc(text)
        print(f"[run_all] updated {DOC}", file=sys.stderr)
    failed = [r["name"] for r in runs if r["rc"] != 0]
    if failed:
        print(f"[run_all] failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
