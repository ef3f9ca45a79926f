"""The CI proof gate: run every case of a proof matrix and judge it (`judge.judge`).

A case that raises (the kernel raises on some rank, a launch the harness cannot build)
is an `error`; the gate exits 1 if any case failed or errored, else 3 if any is unknown,
else 0.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from meshproof.errors import (
    BadInput,
    ConfigError,
    InternalError,
    MeshproofError,
    TraceCrashed,
    TraceLimitExceeded,
)
from meshproof.gate.cache import GateCache, cache_root
from meshproof.gate.judge import CaseStatus, judge
from meshproof.gate.matrix import GateCase, GateMatrix, resolve_case_launches
from meshproof.gate.pipeline import Pipeline, run_case
from meshproof.gate.results import CaseResult, GateResult
from meshproof.gate.synthesized import stale_kernel
from meshproof.model.isolation import limit_stage
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import LaunchSpec
from meshproof.panels import panel_input_bound
from meshproof.sim.config import SimConfig
from meshproof.verify.api import VerifyConfig
from meshproof.verify.cvc5_solver import require_cvc5
from meshproof.verify.z3util import leave_ctrl_c_to_the_caller

if TYPE_CHECKING:
    from meshproof.gate.cluster import ClusterSpec

def case_configs(case: GateCase, launch: LaunchSpec) -> tuple[VerifyConfig, SimConfig]:
    """How a case is verified (its queue depth, timeout, rlimit) and simulated (the
    simulator's defaults, seed 0; timing is not part of the gate)."""
    defaults = VerifyConfig()
    verify_config = VerifyConfig(
        queue_depth=launch.queue_depth, timeout_s=case.timeout,
        rlimit=case.rlimit if case.rlimit is not None else defaults.rlimit,
        input_bound=case.input_bound if case.input_bound is not None else
        panel_input_bound(case.panel, case.scale), score_bound=case.score_bound,
        rounding_tolerance=case.rounding_tolerance, only=frozenset(case.only),
        skip=frozenset(case.skip), recheck=case.recheck)
    return verify_config, SimConfig(timing=False)


def case_pipeline(case: GateCase, pipeline: Pipeline) -> Pipeline:
    """The pipeline a case runs through: its own `trace_timeout`, if it has one, for an
    isolated resolver and tracer."""
    if case.trace_timeout is None:
        return pipeline
    knob = f"the trace_timeout key of case {case.name!r}"
    return replace(pipeline,
                   resolver=limit_stage(pipeline.resolver, case.trace_timeout, knob),
                   tracer=limit_stage(pipeline.tracer, case.trace_timeout, knob))


def evaluate(case: GateCase, *, kernel: KernelRef | None = None,
             cache: GateCache | None = None, pipeline: Pipeline = Pipeline()) -> CaseResult:
    """Run one case through the pipeline and judge it; errors of the kernel (a trace
    limit expiring included) become an ERROR result, which is never cached."""
    start = time.perf_counter()
    spec: LaunchSpec | None = None
    pipeline = case_pipeline(case, pipeline)
    try:
        launches = resolve_case_launches(case, kernel, resolver=pipeline.resolver)
        spec = launches.launches[0][1].spec
        verify_config, sim_config = case_configs(case, spec)
        outcome = run_case(launches, simulate=case.simulate, verify_config=verify_config,
                           sim_config=sim_config, cache=cache, pipeline=pipeline)
        # never cached: the committed file may change while its schedule does not
        stale = stale_kernel(case, pipeline.resolver) if case.synthesized else None
    except InternalError as exc:
        return _error(case, f"internal error (please report): {exc}", start, spec)
    except MeshproofError as exc:
        return _error(case, str(exc), start, spec)
    judgement = judge(case.expectation, outcome)
    if stale is not None:
        judgement = judgement.with_stale_kernel(stale)
    return CaseResult(case, judgement.status, outcome, judgement,
                      seconds=time.perf_counter() - start, launch=spec)


def _error(case: GateCase, message: str, start: float, spec: LaunchSpec | None) -> CaseResult:
    return CaseResult(case, CaseStatus.ERROR, None, None, error=message,
                      seconds=time.perf_counter() - start, launch=spec)


def check_matrix(matrix: GateMatrix, pipeline: Pipeline = Pipeline()) -> None:
    """Resolve every kernel (with the pipeline's resolver) and build every launch now, so a
    bad case is a bad file (exit 2) before anything is proved, not a failure discovered
    minutes later."""
    for index, case in enumerate(matrix.cases, start=1):
        if case.recheck is not None:
            require_cvc5()   # a missing second solver is bad input (exit 2), up front
        try:
            resolve_case_launches(case, resolver=case_pipeline(case, pipeline).resolver)
        except (TraceLimitExceeded, TraceCrashed):
            continue  # the kernel file's own fault, not the matrix's: an error row
        except BadInput as exc:
            # the same `FILE: case #N (NAME):` prefix as the file's own errors
            raise ConfigError(f"{matrix.path}: case #{index} ({case.name}): {exc}") from None


def default_cache(directory: Path | None = None) -> GateCache:
    """The gate's cache under `cache_root(directory)` (`--cache-dir`, the environment)."""
    return GateCache(cache_root(directory) / "gate")


def run_gate(matrix: GateMatrix, *, jobs: int = 1, cache: GateCache | None = None,
             on_result: Callable[[CaseResult], None] | None = None,
             pipeline: Pipeline = Pipeline(), cluster: ClusterSpec | None = None
             ) -> GateResult:
    """Run every case, in matrix order in the result whatever the completion order;
    `cluster`: on a Dask cluster (gate/cluster.py), each case as `--jobs` runs it."""
    results: dict[int, CaseResult] = {}
    if cluster is not None:
        from meshproof.gate.cluster import run_cases

        def done(i: int, result: CaseResult) -> None:
            results[i] = result
            if on_result:
                on_result(result)

        run_cases(cluster, matrix.cases, cache.directory if cache else None, pipeline,
                  _evaluate_in_worker, done)
    elif jobs <= 1 or len(matrix.cases) <= 1:
        for i, case in enumerate(matrix.cases):
            results[i] = evaluate(case, cache=cache, pipeline=pipeline)
            if on_result:
                on_result(results[i])
    else:
        # spawn, not fork: the parent may run a progress-display thread
        context = multiprocessing.get_context("spawn")
        workers = min(jobs, len(matrix.cases))
        cache_dir = cache.directory if cache else None
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                   initializer=_worker_init)
        try:
            futures = {pool.submit(_evaluate_in_worker, case, cache_dir, pipeline): i
                       for i, case in enumerate(matrix.cases)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                if on_result:
                    on_result(results[i])
        except BaseException:  # Ctrl-C, SIGTERM, a worker that died: no case goes on
            _abandon(pool)
            raise
        pool.shutdown()
    return GateResult(matrix.path, tuple(results[i] for i in range(len(matrix.cases))))


def _worker_init() -> None:
    """A worker leaves Ctrl-C to the gate's process, which ends every worker; Z3 would
    otherwise turn it into the end of one solver call, and the worker would go on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    leave_ctrl_c_to_the_caller()


def _abandon(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: an interrupted case is never
    finished, so never cached."""
    # the executor keeps its processes private; terminating them is the only way to stop
    # a case under way
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.terminate()
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(5)


def _evaluate_in_worker(case: GateCase, cache_dir: Path | None,
                        pipeline: Pipeline) -> CaseResult:
    result = evaluate(case, cache=GateCache(cache_dir) if cache_dir else None,
                      pipeline=pipeline)
    if result.outcome is None:
        return result
    # the schedule and full results stay in the worker; the outcome carries what the
    # gate reports
    light = replace(result.outcome, schedule=None, verdict=None, simulation=None)
    return replace(result, outcome=light)
