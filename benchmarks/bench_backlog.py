"""One extractive summarize over a backlog of N uncompacted events.

A maintenance pass over a long uncompacted backlog hands every event to the
embedded :class:`~aiden.ExtractiveSummarizer` in one request.
The work must grow about linearly with N: this times ``summarize_sync`` for
N = 1k, 4k, 16k (and 64k unless ``--quick``) synthetic events with repeating,
near-identical content ("Continue with step N", similar tool outputs and
errors) so the dedupe is exercised, and prints ms, ms/event and the ratio
t(4N)/t(N) (linear ~4, quadratic ~16).

    python benchmarks/bench_backlog.py [--quick] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest


def backlog(n: int) -> tuple[SessionEvent, ...]:
    """``n`` events of an agent loop: user asks, assistant plans, tool calls and results."""
    events: list[SessionEvent] = []
    i = 0
    while len(events) < n:
        step = i
        kind = i % 4
        seq = len(events) + 1
        if kind == 0:
            events.append(
                SessionEvent(
                    type="user_input",
                    seq=seq,
                    content=f"Continue with step {step}. Ticket PROJ-{step % 97} must stay under {step % 13} MB.",
                )
            )
        elif kind == 1:
            events.append(
                SessionEvent(
                    type="assistant_output",
                    seq=seq,
                    content=(
                        f"I decided to run step {step} of PROJ-{step % 97} because the export of "
                        f"billing/export_{step % 31}.py needs it. Continue with step {step + 1} next."
                    ),
                )
            )
        elif kind == 2:
            events.append(
                SessionEvent(
                    type="tool_call",
                    seq=seq,
                    tool_name="bash",
                    tool_call_id=f"c{step}",
                    tool_args=json.dumps({"command": f"pytest -q tests/test_export_{step % 31}.py"}),
                )
            )
        else:
            ok = step % 3 != 0
            content = (
                f"{step % 50} passed in 0.{step % 9}s"
                if ok
                else (
                    "Traceback (most recent call last):\n"
                    f'  File "billing/export_{step % 31}.py", line {step % 200}, in run\n'
                    f"ValueError: bad row {step} in invoice INV-{step % 211}\n"
                    f"1 failed, {step % 50} passed"
                )
            )
            events.append(
                SessionEvent(
                    type="tool_result",
                    seq=seq,
                    tool_name="bash",
                    tool_call_id=f"c{step - 1}",
                    content=content,
                    meta={"exit_code": 0 if ok else 1},
                )
            )
        i += 1
    return tuple(events)


def time_one(n: int, repeats: int) -> float:
    """Median wall seconds of one summarize over ``n`` events."""
    summarizer = ExtractiveSummarizer()
    request = SummaryRequest(purpose="history", events=backlog(n))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        summarizer.summarize_sync(request)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip N = 64k")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [1_000, 4_000, 16_000] if args.quick else [1_000, 4_000, 16_000, 64_000]
    previous: float | None = None
    print(f"{'N':>7} {'ms':>10} {'ms/event':>9} {'t(N)/t(N/4)':>12}")
    for n in sizes:
        seconds = time_one(n, args.repeats if n < 64_000 else 1)
        ratio = f"{seconds / previous:12.2f}" if previous else f"{'':>12}"
        print(f"{n:>7} {seconds * 1000:10.1f} {seconds * 1000 / n:9.4f} {ratio}")
        previous = seconds


if __name__ == "__main__":
    main()
