"""verify/certificate_job.py: the order certificate checked on the second core gives the
verdict of checking it inline; a check that dies leaves the property unknown, never proved."""

from __future__ import annotations

import os

import pytest
from helpers import trace_kernel

from meshproof.model import trace_split
from meshproof.verify import certificate_job
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Status

pytestmark = pytest.mark.skipif(not trace_split.two_cores(), reason="needs two cores and fork")
DEADLOCK = "deadlock_freedom"


def _verdict(kernel: str, **options: object) -> dict[str, object]:
    schedule = trace_kernel(kernel, **options)
    return verify(schedule, VerifyConfig(queue_depth=schedule.launch.queue_depth)).to_json(
        timings=False)


@pytest.mark.parametrize(("kernel", "options"), [
    ("mesh_mlo_1d", {"queue_depth": 3}),            # proved
    ("mesh_mlo_1d", {"queue_depth": 2}),            # deadlocks: no certificate job
    ("mesh_mlo_2d", {"mesh": "2x4", "queue_depth": 4}),
])
def test_the_second_core_certifies_as_the_first_does(
        monkeypatch: pytest.MonkeyPatch, kernel: str, options: dict[str, object]) -> None:
    inline = _verdict(kernel, **options)
    started: list[int] = []
    real = certificate_job.start
    monkeypatch.setattr(certificate_job, "BACKGROUND_OPS", 0)
    monkeypatch.setattr(certificate_job, "start",
                        lambda *a: started.append(1) or real(*a))  # type: ignore[func-returns-value]
    assert _verdict(kernel, **options) == inline
    assert started == ([] if options.get("queue_depth") == 2 else [1])


def test_a_check_that_dies_leaves_deadlock_freedom_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(certificate_job, "BACKGROUND_OPS", 0)
    monkeypatch.setattr(certificate_job, "check_order", lambda *a, **k: os._exit(3))
    schedule = trace_kernel("mesh_mlo_1d", queue_depth=3)
    verdict = verify(schedule, VerifyConfig(queue_depth=3))
    p = verdict.property(DEADLOCK)
    assert p.status is Status.UNKNOWN and not verdict.ok
    assert p.message == ("simulation says deadlock-free at D=3, but the Z3 certificate was "
                         "not obtained: order certificate: solver returned unknown (the "
                         "certificate check on the second core ended without an answer "
                         "(exit code 3)); not certified")


def test_a_verify_that_fails_elsewhere_leaves_no_child_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from meshproof.verify import registry
    from meshproof.verify.properties import Property

    jobs: list[certificate_job.CertificateJob] = []
    real = certificate_job.start
    monkeypatch.setattr(certificate_job, "BACKGROUND_OPS", 0)
    monkeypatch.setattr(certificate_job, "start", lambda *a: jobs.append(real(*a)) or jobs[-1])

    def boom(ctx: object) -> object:
        raise RuntimeError("a property failed")

    monkeypatch.setitem(registry.CHECKS, Property.NUMERIC_SAFETY, boom)
    with pytest.raises(RuntimeError):
        verify(trace_kernel("mesh_mlo_1d", queue_depth=3), VerifyConfig(queue_depth=3))
    assert len(jobs) == 1 and jobs[0].done
    with pytest.raises(ChildProcessError):
        os.waitpid(jobs[0].pid, os.WNOHANG)   # reaped
