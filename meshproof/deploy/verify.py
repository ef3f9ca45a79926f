"""Verify a deployment: every launch's properties, plus launch_separation across them.

A deployment is proved when every property of every launch is proved and the launches
are separated; it is violated when any of these is violated; otherwise unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meshproof.deploy.deployment import Deployment
from meshproof.deploy.separation import SeparationResult, launch_separation
from meshproof.exitcodes import ExitCode
from meshproof.model.schedule import Schedule
from meshproof.verify.api import verify
from meshproof.verify.properties import VerifyConfig
from meshproof.verify.result import Status, Verdict

DEPLOYMENT_SCHEMA = "meshproof/deployment-v1"

Verifier = Callable[[Schedule, VerifyConfig], Verdict]


@dataclass(frozen=True, slots=True)
class DeploymentVerdict:
    """Each launch's verdict, in launch order, and the cross-launch check."""

    deployment: Deployment
    verdicts: tuple[Verdict, ...]
    separation: SeparationResult

    @property
    def ok(self) -> bool:
        return self.separation.ok and all(v.ok for v in self.verdicts)

    @property
    def exit_code(self) -> ExitCode:
        codes = [v.exit_code for v in self.verdicts]
        if self.separation.status is Status.VIOLATED or ExitCode.VIOLATED in codes:
            return ExitCode.VIOLATED
        if ExitCode.UNKNOWN in codes:
            return ExitCode.UNKNOWN
        return ExitCode.OK

    def failing(self) -> tuple[int, ...]:
        """Launches (indices) with a property not proved."""
        return tuple(i for i, v in enumerate(self.verdicts) if not v.ok)

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        d = self.deployment
        return {"schema": DEPLOYMENT_SCHEMA, "ok": self.ok, "name": d.name,
                "system": d.system.shape_text, "endpoints": d.endpoints,
                "launches": [v.to_json(timings=timings) for v in self.verdicts],
                "separation": self.separation.to_json(timings=timings)}


def verify_deployment(deployment: Deployment, config: VerifyConfig = VerifyConfig(),
                      verifier: Verifier = verify) -> DeploymentVerdict:
    verdicts = tuple(verifier(s, config) for s in deployment.schedules)
    return DeploymentVerdict(deployment, verdicts, launch_separation(deployment))
