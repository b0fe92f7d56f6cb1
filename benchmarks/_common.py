"""Shared helpers for the benchmarks: percentiles, medians over repeats, paired ratios,
result files, targets and machine facts.

Stdlib only: ``bench_peer.py`` imports this module inside the separate peer
venv too, where aiden is not installed.

Every figure a benchmark reports is a median over repeats (with min and max),
and every comparison is a ratio against a baseline measured in the same run,
ideally in the same repeat (:func:`paired`): the machines this runs on are
shared and noisy, absolute numbers drift from minute to minute.
"""

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

RESULTS = Path(os.environ.get("AIDEN_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
"""Where results go (``AIDEN_BENCH_RESULTS`` overrides it, e.g. for the smoke test)."""


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """median/min/max (and n) of repeated measurements."""
    if not samples:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def paired(numerators: Sequence[float], denominators: Sequence[float]) -> dict[str, float]:
    """Per-repeat ratios ``a[i] / b[i]`` (both measured back to back in repeat i), summarized."""
    return summarize([a / b for a, b in zip(numerators, denominators, strict=True) if b])


def latency_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50/p99/p99.9/max in milliseconds of latency samples given in seconds."""
    return {
        "p50": pct(samples, 50) * 1e3,
        "p99": pct(samples, 99) * 1e3,
        "p999": pct(samples, 99.9) * 1e3,
        "max": (max(samples) * 1e3) if samples else float("nan"),
        "samples": len(samples),
    }


def rng(s: dict[str, float], fmt: str = ",.0f", scale: float = 1.0, suffix: str = "") -> str:
    """``median (min-max)`` of a :func:`summarize` dict, formatted."""
    m, lo, hi = s["median"] * scale, s["min"] * scale, s["max"] * scale
    if s.get("n", 2) == 1:
        return f"{m:{fmt}}{suffix}"
    return f"{m:{fmt}}{suffix} ({lo:{fmt}}-{hi:{fmt}})"


def target(name: str, goal: str, value: float, met: bool, measured: str, note: str = "") -> dict[str, Any]:
    """One target check, as reported in the summary's targets table."""
    return {"name": name, "goal": goal, "value": value, "met": bool(met), "measured": measured, "note": note}


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _disk(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        line = subprocess.run(
            ["df", "-hT", str(path)], capture_output=True, text=True, check=False, timeout=10
        ).stdout.splitlines()[-1].split()
        out.update(device=line[0], fs=line[1], size=line[2], avail=line[4])
    except (OSError, IndexError, subprocess.SubprocessError):
        return out
    dev = os.path.basename(out["device"])
    block = dev.rstrip("0123456789") if not dev.startswith("nvme") else dev.split("p")[0]
    model = _read(f"/sys/block/{block}/device/model") or _read(f"/sys/block/{block}/device/vendor")
    if model:
        out["model"] = model
    if block.startswith("vd"):
        # A virtio disk's rotational flag says nothing about the media behind it.
        out["kind"] = "virtio block device (VM disk, media unknown)"
    else:
        rot = _read(f"/sys/block/{block}/queue/rotational")
        if rot:
            out["rotational"] = rot == "1"
    opts = [ln.split()[3] for ln in _read("/proc/mounts").splitlines() if ln.split()[:1] == [out["device"]]]
    if opts:
        out["mount_options"] = opts[0]
    return out


def machine() -> dict[str, Any]:
    """Facts about where the numbers were taken."""
    cpu = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_gb = float("nan")
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_gb = int(line.split()[1]) / 1024 / 1024
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    import tempfile

    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(mem_gb, 1),
        "loadavg_at_start": [round(x, 2) for x in load],
        "disk": _disk(Path(tempfile.gettempdir())),
        "tmpdir": tempfile.gettempdir(),
    }


def describe(m: dict[str, Any]) -> str:
    """One paragraph describing :func:`machine`'s facts."""
    d = m.get("disk", {})
    disk = ", ".join(
        str(x)
        for x in (
            d.get("kind") or d.get("model"),
            f"{d.get('fs')} ({d.get('mount_options')})" if d.get("mount_options") else d.get("fs"),
            ("rotational" if d.get("rotational") else "non-rotational") if "rotational" in d else None,
            f"{d.get('size')} ({d.get('avail')} free)" if d.get("size") else None,
        )
        if x
    )
    return (
        f"{m.get('date')}; {m.get('cpu') or 'unknown CPU'}, {m.get('cpus_usable')} usable cores "
        f"({m.get('cpus')} online), {m.get('memory_gb')} GB RAM; temp files on {m.get('tmpdir')}: {disk}; "
        f"Python {m.get('python')} on {m.get('platform')}; load average at start "
        f"{'/'.join(str(x) for x in m.get('loadavg_at_start', []))} (shared machine)."
    )


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2, default=str))
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


def rotate(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` rotated by ``k``: repeat k runs the systems in another order, so drift
    of a shared machine during a repeat does not always favour the same system."""
    if not items:
        return []
    k %= len(items)
    return [*items[k:], *items[:k]]
