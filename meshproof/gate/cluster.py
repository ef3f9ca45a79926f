"""The gate's cases on a Dask cluster: `meshproof gate --cluster ADDRESS|local:N`.

Each case is one task running the same `evaluate` as `--jobs` workers do
(`runner._evaluate_in_worker`), so a case's result, and every file the gate writes from
the results, is the serial gate's: results are put back in matrix order whatever order
they finish in. The cache is content-keyed: workers read and write the same entries a
serial run would (on a shared directory, across machines).

A worker that dies under a case (the scheduler gives up on the task: `KilledWorker`, or
the connection to it is lost) has the case resubmitted once; a second loss makes the case
`unknown`, naming the cluster, never lost or counted twice. An exception inside a case is
the serial gate's (an error row, or a bug: exit 70). Ctrl-C cancels every task, closes the
client (and the local cluster) and is re-raised: the gate exits 130 and caches nothing
under way.

dask.distributed is an optional extra (`pip install 'meshproof[cluster]'`), imported only
here and only for `--cluster`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshproof.errors import OptionError
from meshproof.gate.judge import CaseStatus
from meshproof.gate.matrix import GateCase
from meshproof.gate.pipeline import Pipeline

MISSING = ("--cluster needs dask.distributed, which is not installed: "
           "pip install 'meshproof[cluster]' (or pip install 'dask[distributed]')")
LOCAL = "local:"
RESUBMITS = 1     # a case whose worker died is tried once more, then unknown
POLL_S = 0.05     # how often the client looks for finished cases


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Where cases go: a scheduler's address, or N local worker processes."""

    address: str | None = None
    local_workers: int = 0

    @property
    def name(self) -> str:
        return self.address or f"{LOCAL}{self.local_workers}"


def parse_cluster(text: str) -> ClusterSpec:
    """`local:N` (N >= 1) or a scheduler address (`tcp://host:8786`, `host:8786`);
    OptionError otherwise, and when dask.distributed is missing."""
    text = text.strip()
    if text.startswith(LOCAL):
        count = text[len(LOCAL):]
        if not count.isdigit() or int(count) < 1:
            raise OptionError(f"--cluster {text}: local:N needs a worker count N >= 1, "
                              "e.g. local:2")
        spec = ClusterSpec(local_workers=int(count))
    elif not text or any(c.isspace() for c in text):
        raise OptionError(f"--cluster {text!r}: give a scheduler address "
                          "(tcp://HOST:PORT) or local:N")
    else:
        spec = ClusterSpec(address=text)
    if importlib.util.find_spec("distributed") is None:
        raise OptionError(MISSING)
    return spec


@contextmanager
def connect(spec: ClusterSpec) -> Iterator[Any]:
    """A client of the cluster; a local one (on 127.0.0.1 only, one thread per worker
    process, no dashboard) lives as long as the client."""
    import dask

    dist = _distributed()
    # workers trace kernels in child processes (model/isolation.py): not daemonic
    with dask.config.set({"distributed.worker.daemon": False,
                          "distributed.scheduler.allowed-failures": 0}):
        if spec.address is not None:
            with dist.Client(spec.address, timeout="30s") as client:
                yield client
            return
        with dist.LocalCluster(n_workers=spec.local_workers, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None,
                          silence_logs=logging.ERROR) as cluster, \
                dist.Client(cluster) as client:
            yield client


Evaluate = Callable[[GateCase, Path | None, Pipeline], Any]


def run_cases(spec: ClusterSpec, cases: tuple[GateCase, ...], cache_dir: Path | None,
              pipeline: Pipeline, evaluate: Evaluate,
              on_result: Callable[[int, Any], None]) -> None:
    """Every case as a task; `on_result(index, result)` as each one finishes."""
    with connect(spec) as client:
        futures: dict[Any, tuple[int, int]] = {}   # future -> (case index, attempt)

        def submit(i: int, attempt: int) -> Any:
            future = client.submit(evaluate, cases[i], cache_dir, pipeline, pure=False,
                                   key=f"meshproof-case-{i}-try-{attempt}")
            futures[future] = (i, attempt)
            return future

        for i in range(len(cases)):
            submit(i, 0)
        try:
            while futures:
                done = [f for f in futures if f.done()]
                if not done:
                    # polled, not waited on: a wait inside dask's client would not let the
                    # Ctrl-C handler run until a case finished
                    time.sleep(POLL_S)
                for future in sorted(done, key=lambda f: futures[f]):
                    i, attempt = futures.pop(future)
                    lost = _lost(future)
                    if lost and attempt < RESUBMITS:
                        submit(i, attempt + 1)
                        continue
                    on_result(i, _unknown(cases[i], spec, lost) if lost else future.result())
        except BaseException:   # Ctrl-C, SIGTERM: no case goes on
            client.cancel(list(futures))
            # a cancelled task's thread runs on, and so would the trace child it started
            with contextlib.suppress(Exception):
                client.run(kill_descendants, wait=True)
            raise


def _lost(future: Any) -> str:
    """Why the cluster lost the task ("" when it ran: its result or its own exception)."""
    dist = _distributed()
    if future.status == "finished":
        return ""
    error = future.exception()
    if isinstance(error, (dist.KilledWorker, dist.comm.core.CommClosedError, OSError)):
        return f"{type(error).__name__}: {error}"
    return ""   # the case's own exception: future.result() raises it, as serially


def kill_descendants() -> int:
    """SIGKILL every process below this one (run on each worker when the gate stops: the
    kernels' trace children and their fork server, which outlive a worker otherwise);
    the number killed. Linux: read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    below, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        below.append(pid)
        todo += children.get(pid, [])
    for pid in below:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(below)


def _distributed() -> Any:
    """dask.distributed, untyped (it ships no type hints)."""
    return importlib.import_module("distributed")


def _unknown(case: GateCase, spec: ClusterSpec, why: str) -> Any:
    from meshproof.gate.results import CaseResult

    return CaseResult(case, CaseStatus.UNKNOWN, None, None,
                      error=f"the cluster {spec.name} lost the case twice (a worker died: "
                            f"{why}); not proved, rerun it")
