"""Plot throughput and latency against concurrency from ``results/append.json`` (and ``peer.json``).

Writes ``results/append.png``: left, events/s against appenders (log-log) for
aiden (fsync and none), the bare group-commit loop, per-event fsync and, when
``peer.json`` exists, nanobot's append_history; right, aiden's and the group
commit's p50/p99/p99.9 append latency. matplotlib comes from the ``bench``
extra; without it this prints why and exits 0 (the JSON and tables remain).

    python benchmarks/plot.py [--results DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS


def plot(results: Path = RESULTS) -> Path | None:
    """Draw the figure; returns its path, or None when matplotlib or append.json is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed (pip install -e '.[bench]'); no PNG written")
        return None
    src = results / "append.json"
    if not src.exists():
        print(f"plot: {src} not found; run bench_append.py first")
        return None
    data: dict[str, Any] = json.loads(src.read_text())
    levels = sorted(int(k) for k in data["levels"])
    lv = [data["levels"][str(n)] for n in levels]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))

    def series(ax: Any, key: str, label: str, style: str) -> None:
        med = [e[key]["eps"]["median"] for e in lv]
        lo = [e[key]["eps"]["min"] for e in lv]
        hi = [e[key]["eps"]["max"] for e in lv]
        ax.plot(levels, med, style, label=label)
        ax.fill_between(levels, lo, hi, alpha=0.15)

    series(ax1, "aiden_fsync", "aiden, durability=fsync", "o-")
    series(ax1, "aiden_none", "aiden, durability=none", "s--")
    series(ax1, "group_commit", "bare group-commit loop (fsync)", "^-")
    series(ax1, "per_event_fsync", "bare write+fsync per event", "v:")
    peer_path = results / "peer.json"
    if peer_path.exists():
        peer = json.loads(peer_path.read_text())
        pts = sorted(
            (e["appenders"], e["nanobot_eps"]["median"])
            for e in peer.get("appends", {}).values()
            if e.get("event_mix") == "small" and not e.get("tmpfs")
        )
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], "x-.", label="nanobot append_history (no fsync)")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xticks(levels, [str(n) for n in levels])
    ax1.set_xlabel("concurrent appenders")
    ax1.set_ylabel("events/s (median, band = min-max of repeats)")
    ax1.set_title("Durable append throughput")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)

    for key, label, color in (("aiden_fsync", "aiden fsync", "C0"), ("group_commit", "group commit", "C2")):
        for q, style in (("p50", "o-"), ("p99", "s--"), ("p999", "^:")):
            ax2.plot(levels, [e[key]["latency_ms"][q] for e in lv], style, color=color, label=f"{label} {q}")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xticks(levels, [str(n) for n in levels])
    ax2.set_xlabel("concurrent appenders")
    ax2.set_ylabel("append latency, ms (samples of all repeats)")
    ax2.set_title("Append latency")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8, ncol=2)

    m = data.get("machine", {})
    fig.suptitle(f"aiden append benchmark - {m.get('date', '')}, {m.get('cpus_usable', '?')} cores, "
                 f"{m.get('disk', {}).get('fs', '')} on {m.get('disk', {}).get('device', '')}", fontsize=10)
    fig.tight_layout()
    out = results / "append.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    out = plot(args.results)
    if out is not None:
        print(f"written {out}")


if __name__ == "__main__":
    main()
