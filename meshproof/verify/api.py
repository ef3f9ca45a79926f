"""Entry point of verification: the selected properties of a schedule, as one Verdict."""

from __future__ import annotations

import math

from meshproof.errors import InternalError, LaunchError, OptionError
from meshproof.model.channels import derive_channels
from meshproof.model.launch import MAX_QUEUE_DEPTH
from meshproof.model.schedule import Schedule
from meshproof.verify.certificate_job import certificate_job
from meshproof.verify.properties import PROPERTY_NAMES, CheckContext, Property, VerifyConfig
from meshproof.verify.registry import CHECKS
from meshproof.verify.result import PropertyResult, Recheck, Verdict
from meshproof.verify.z3util import Budget

__all__ = ["VerifyConfig", "verify"]


def verify(schedule: Schedule, config: VerifyConfig = VerifyConfig()) -> Verdict:
    ctx = CheckContext(schedule, derive_channels(schedule), config,
                       Budget(config.timeout_s, config.rlimit))
    if not 0 <= ctx.depth <= MAX_QUEUE_DEPTH:
        raise LaunchError(f"queue depth {ctx.depth} is out of range 0..{MAX_QUEUE_DEPTH}")
    if not (math.isfinite(config.timeout_s) and config.timeout_s > 0):
        raise LaunchError(f"--timeout must be a positive, finite number of seconds, got "
                          f"{config.timeout_s}")
    selected = config.selected()
    if not selected:
        raise OptionError("--only/--skip leave no property to check; properties: "
                          f"{', '.join(PROPERTY_NAMES)}")
    if config.recheck is not None:
        from meshproof.verify.cvc5_solver import require_cvc5

        require_cvc5()   # before any work: a missing solver is bad input, not unknown
    results: dict[Property, PropertyResult] = {}
    rechecks: list[Recheck] = []
    job = ctx.shared(certificate_job) if Property.DEADLOCK_FREEDOM in selected else None
    try:
        # deadlock_freedom last: on large launches Z3 checks its certificate on the second
        # core meanwhile (verify/certificate_job.py); results are listed in verdict order
        ordered = sorted(selected, key=lambda p: p is Property.DEADLOCK_FREEDOM)
        for index, prop in enumerate(ordered):
            ctx.start(prop, index, len(ordered))
            check = CHECKS.get(prop)
            if check is None:
                raise InternalError(f"no check is registered for {prop.value}; add one to "
                                    "meshproof/verify/registry.py")
            result = check(ctx)
            if result.name is not prop:
                raise InternalError(f"the check registered for {prop.value} reported "
                                    f"{result.name.value}")
            if config.recheck is not None:
                from meshproof.verify.recheck import recheck_one

                result, record = recheck_one(ctx, result, config.recheck)
                rechecks.append(record)
            results[prop] = result
    finally:
        if job is not None:
            job.cancel()
    skipped = tuple(p for p in Property if p not in selected)
    return Verdict(schedule.launch.kernel, schedule.launch,
                   tuple(results[p] for p in selected), ctx.depth, skipped,
                   tuple(sorted(rechecks, key=lambda r: selected.index(r.name))))
