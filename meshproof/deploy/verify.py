"""Verify a deployment: every launch's properties, plus launch_separation across them.

A deployment is proved when every property of every launch is proved and the launches
are separated; it is violated when any of these is violated; otherwise unknown. A launch
whose schedule is an earlier, proved launch's moved over the same links (the kv groups of
a panel: one kernel at cube_start 0, 8, ...) carries that launch's proofs
(relocation.py); `reuse=False` verifies every launch from scratch.
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
    carried_from: tuple[int | None, ...] = ()   # per launch: the launch whose proofs it has

    @property
    def ok(self) -> bool:
        return self.separation.ok and all(v.ok for v in self.verdicts)

    @property
    def status(self) -> Status:
        """The worst of every launch's properties and launch_separation."""
        return Status.worst([*(v.status for v in self.verdicts), self.separation.status])

    @property
    def exit_code(self) -> ExitCode:
        return self.status.exit_code

    def failing(self) -> tuple[int, ...]:
        """Launches (indices) with a property not proved."""
        return tuple(i for i, v in enumerate(self.verdicts) if not v.ok)

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        d = self.deployment
        return {"schema": DEPLOYMENT_SCHEMA, "ok": self.ok, "name": d.name,
                "system": d.system.shape_text, "endpoints": d.endpoints,
                "launches": [v.to_json(timings=timings) for v in self.verdicts],
                "carried_from": [None if c is None else c + 1 for c in self.carried_from],
                "separation": self.separation.to_json(timings=timings)}


def verify_deployment(deployment: Deployment, config: VerifyConfig = VerifyConfig(),
                      verifier: Verifier = verify, *, reuse: bool = True) -> DeploymentVerdict:
    verdicts: list[Verdict] = []
    carried: list[int | None] = []
    for schedule in deployment.schedules:
        verdict, origin = None, None
        for j in range(len(verdicts)) if reuse else ():
            if carried[j] is None:
                # imported from the second launch on: one launch's verify never loads it
                from meshproof.deploy.relocation import carry_proofs

                verdict = carry_proofs(verdicts[j], deployment.schedules[j], schedule)
                if verdict is not None:
                    origin = j
                    break
        verdicts.append(verdict if verdict is not None else verifier(schedule, config))
        carried.append(origin)
    return DeploymentVerdict(deployment, tuple(verdicts), launch_separation(deployment),
                             tuple(carried))
