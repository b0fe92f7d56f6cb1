"""Shared helpers for the benchmarks: percentiles, medians over repeats, result files, machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """median/min/max of repeated measurements."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def machine() -> dict[str, Any]:
    """Facts about where the numbers were taken."""
    try:
        df = subprocess.run(["df", "-h", "/tmp"], capture_output=True, text=True, check=False).stdout.splitlines()[-1]
    except OSError:
        df = "?"
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "disk": df,
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2))
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)
