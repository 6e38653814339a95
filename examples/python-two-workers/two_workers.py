"""Two workers. One ID. — the seed's four replay cases, from a Python host.

Each case runs Python worker processes (``multiprocessing``, spawned: separate interpreters,
separate memory) that handle the same A2UI ``functionCallId``:

- **before**: each worker checks the ID in its own process memory (a ``set``), then runs the
  callback. Every process sees the ID for the first time, so every process runs it.
- **after**: each worker asks one ``tessera serve`` to claim the call (``a2ui_claim``); only
  the worker handed a dispatch handle runs the callback and settles it (``a2ui_settle``). The
  others get the service's correlated ``INVALID_FUNCTION_CALL`` reply and run nothing.

The callback is simulated: it appends a line to a file, and nothing else happens. Every figure
printed is counted from the run: callbacks from that file, claimed/reused from what the service
answered each worker, claim markers from the service's claim directory.

    python3 examples/python-two-workers/two_workers.py [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

try:
    import tessera_client
except ImportError:  # run from a checkout without `pip install ./clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    import tessera_client

from local_service import LocalService  # noqa: E402 (beside this file)

CATALOG_ID = "https://tessera.dev/catalogs/two-workers-demo"
CATALOG: dict[str, Any] = {
    "catalogId": CATALOG_ID,
    "functions": {
        "quote": {
            "type": "object",
            "description": "Simulated tool: prices an order. Nothing outside the demo happens.",
            "returnType": "object",
            "allowedCallers": "agentOnly",
            "properties": {
                "call": {"const": "quote"},
                "args": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                },
            },
            "required": ["call", "args"],
        }
    },
}

#: The one functionCallId every worker of every case sends.
CALL_ID = "call-1"
PARALLEL = "parallel OS processes"
SEQUENTIAL = "sequential new OS process"


def quote_call(function_call_id: str, quantity: int) -> dict[str, Any]:
    return {
        "version": "v1.0",
        "callRendererFunction": {
            "functionCallId": function_call_id,
            "callFunction": {
                "call": "quote",
                "catalogId": CATALOG_ID,
                "args": {"sku": "tile-7", "quantity": quantity},
            },
        },
    }


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    mode: str
    summary: str
    #: The trusted host session of worker ``index`` (the host authenticated it).
    session: Callable[[int], str]
    message: Callable[[int], dict[str, Any]]


def _same_session(key: str) -> Callable[[int], str]:
    return lambda index: f"{key}:host-session-1"


# The TypeScript demo's four cases (packages/cli/src/demos/two-workers/cases.ts). Sessions are
# prefixed by the case: all cases share one service, as the TS demo's shared-store runs do.
CASES: tuple[Case, ...] = (
    Case(
        "two-workers-one-id", "Two workers, one ID", PARALLEL,
        "Same functionCallId and host session.",
        _same_session("two-workers-one-id"), lambda index: quote_call(CALL_ID, 2),
    ),
    Case(
        "same-id-changed-body", "Same ID, changed body", PARALLEL,
        "Same functionCallId and host session; every later worker's args differ.",
        _same_session("same-id-changed-body"), lambda index: quote_call(CALL_ID, 2 + index),
    ),
    Case(
        "new-worker-old-id", "New worker, old ID", SEQUENTIAL,
        "Same functionCallId and host session; the second process starts after the first exits.",
        _same_session("new-worker-old-id"), lambda index: quote_call(CALL_ID, 2),
    ),
    Case(
        "two-trusted-sessions", "Two trusted sessions", PARALLEL,
        "Same functionCallId, but each worker has its own trusted host session.",
        lambda index: f"two-trusted-sessions:host-session-{index + 1}",
        lambda index: quote_call(CALL_ID, 2),
    ),
)


@dataclass(frozen=True)
class WorkerJob:
    phase: str  # "before" or "after"
    message: dict[str, Any]
    callbacks_file: str
    url: str = ""
    token: str = ""


def simulated_callback(job: WorkerJob, args: dict[str, Any]) -> dict[str, Any]:
    """The simulated tool: it records that it ran, and nothing else happens."""
    with open(job.callbacks_file, "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), "id": CALL_ID}) + "\n")
    return {"sku": args["sku"], "quantity": args["quantity"], "total": args["quantity"] * 3}


def handle_in_memory(job: WorkerJob, seen: set[str]) -> dict[str, Any]:
    """The "before" host: the call ID checked in this process's own memory."""
    call = job.message["callRendererFunction"]
    if call["functionCallId"] in seen:
        return {"responseCode": "INVALID_FUNCTION_CALL", "receiptStatus": "none", "claimed": 0, "reused": 1}
    seen.add(call["functionCallId"])
    simulated_callback(job, call["callFunction"]["args"])
    return {"responseCode": "value", "receiptStatus": "dispatched", "claimed": 1, "reused": 0}


def handle_through_service(job: WorkerJob) -> dict[str, Any]:
    """The "after" host: the service claims the call before anything runs."""
    client = tessera_client.TesseraClient(job.url, job.token)
    claim = client.a2ui_claim(job.message)
    if isinstance(claim, tessera_client.A2uiRefused):
        return {
            "responseCode": claim.reply["error"]["code"],
            "receiptStatus": claim.receipt,
            "claimed": 0,
            "reused": 1 if claim.receipt == "none" else 0,
        }
    value = simulated_callback(job, dict(claim.call.args))
    settled = client.a2ui_settle(claim.handle, value)
    answer = settled.reply.get("rendererFunctionResponse", {})
    code = answer.get("error", {}).get("code", "value") if "error" in answer else "value"
    return {"responseCode": code, "receiptStatus": settled.receipt, "claimed": 1, "reused": 0}


def worker_main(job: WorkerJob, barrier: Any, results: Any) -> None:
    """One worker process: wait at the barrier (parallel cases), handle the call, report."""
    seen: set[str] = set()  # this process's memory: a fresh process starts with nothing
    if barrier is not None:
        barrier.wait(timeout=60)
    try:
        outcome = handle_in_memory(job, seen) if job.phase == "before" else handle_through_service(job)
    except Exception as error:  # reported to the parent, which fails the run
        outcome = {"error": f"{type(error).__name__}: {error}"}
    results.put(outcome)


def run_workers(jobs: list[WorkerJob], mode: str) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    outcomes: list[dict[str, Any]] = []
    if mode == PARALLEL:
        barrier = context.Barrier(len(jobs))
        processes = [context.Process(target=worker_main, args=(job, barrier, results)) for job in jobs]
        for process in processes:
            process.start()
        outcomes = [results.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(timeout=60)
    else:
        for job in jobs:  # each starts only after the previous one has exited: a restart
            process = context.Process(target=worker_main, args=(job, None, results))
            process.start()
            outcomes.append(results.get(timeout=120))
            process.join(timeout=60)
    failed = [o["error"] for o in outcomes if "error" in o]
    if failed:
        raise RuntimeError(f"a worker failed: {failed[0]}")
    return outcomes


def run_phase(case: Case, phase: str, workers: int, service: LocalService) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tessera-py-callbacks-") as scratch:
        callbacks_file = os.path.join(scratch, "callbacks.jsonl")
        markers_before = len(os.listdir(service.claims_dir))
        count = 2 if case.mode == SEQUENTIAL else workers
        jobs = [
            WorkerJob(
                phase, case.message(index), callbacks_file,
                service.url if phase == "after" else "",
                service.tokens[case.session(index)] if phase == "after" else "",
            )
            for index in range(count)
        ]
        outcomes = run_workers(jobs, case.mode)
        try:
            with open(callbacks_file, encoding="utf-8") as lines:
                callbacks = sum(1 for line in lines if line.strip())
        except FileNotFoundError:  # no callback ran
            callbacks = 0
        markers = len(os.listdir(service.claims_dir)) - markers_before if phase == "after" else 0
    return {
        "tool_callbacks": callbacks,
        "claimed": sum(o["claimed"] for o in outcomes),
        "reused": sum(o["reused"] for o in outcomes),
        "claim_markers": markers,
        "response_codes": sorted(o["responseCode"] for o in outcomes),
        "receipt_statuses": sorted(o["receiptStatus"] for o in outcomes),
    }


def run_demo(workers: int = 2) -> dict[str, dict[str, Any]]:
    """Runs the four cases, before and after, through one local ``tessera serve``."""
    if workers < 2:
        raise ValueError("workers must be at least 2")
    sessions = sorted({case.session(i) for case in CASES for i in range(workers)})
    report: dict[str, dict[str, Any]] = {}
    with LocalService(CATALOG, sessions) as service:
        for case in CASES:
            before = run_phase(case, "before", workers, service)
            after = run_phase(case, "after", workers, service)
            report[case.key] = {"mode": case.mode, "before": before, "after": after}
    return report


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _detail(label: str, phase: dict[str, Any]) -> str:
    return (
        f"    {label} claimed {phase['claimed']}, reused {phase['reused']}, "
        f"claim markers {phase['claim_markers']}, responses [{', '.join(phase['response_codes'])}], "
        f"receipts [{', '.join(phase['receipt_statuses'])}]"
    )


def format_report(report: dict[str, dict[str, Any]]) -> str:
    """The TypeScript demo's verdict table, every figure taken from the report."""
    lines = [
        "Two workers. One ID. — replay across the process line (Python host)",
        "Each case runs Python worker processes on the same A2UI call, first with the ID checked",
        "in each process's memory, then through one tessera serve's shared claim. The callback is",
        "simulated: it appends a line to a file and nothing else happens.",
        "",
    ]
    for case in CASES:
        result = report.get(case.key)
        if result is None:
            continue
        processes = len(result["before"]["response_codes"])
        lines.append(f"{case.title} ({case.key}) — {processes} {case.mode}")
        lines.append(f"  {case.summary} The callback is simulated.")
        lines.append(
            f"  Process memory: {_plural(result['before']['tool_callbacks'], 'callback')} / "
            f"Shared claim: {_plural(result['after']['tool_callbacks'], 'callback')}"
        )
        lines.append(_detail("before:", result["before"]))
        lines.append(_detail("after: ", result["after"]))
        lines.append("")
    lines += [
        "Claim boundary: the claim is taken before approval and dispatch; a duplicate in the same",
        "session gets a correlated INVALID_FUNCTION_CALL and runs nothing; another trusted session",
        "may reuse the ID. The service's claim store spans the processes that share it; across",
        "machines, serve from PostgreSQL or Redis. It is not authenticated consent or proof of delivery.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the measured report as JSON")
    parser.add_argument("--workers", type=int, default=2, help="processes per parallel case (>= 2)")
    args = parser.parse_args(argv)
    report = run_demo(args.workers)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
