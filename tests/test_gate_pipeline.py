"""The one pipeline (gate/pipeline.py): stages passed in, refusals recorded, the cache."""

from __future__ import annotations

from pathlib import Path

from helpers import WIDE

from meshproof.deploy.launches import LaunchList
from meshproof.errors import SimulationRefused
from meshproof.gate.cache import GateCache
from meshproof.gate.outcome import CaseOutcome
from meshproof.gate.pipeline import Pipeline, one_launch, run_case
from meshproof.model.launch import Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.sim.config import SimConfig
from meshproof.sim.result import SimResult
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import PropertyResult, Status, Verdict


class Stages:
    """A tracer, verifier and simulator that count their calls (real tracer and verifier)."""

    def __init__(self, *, refuse: bool = False, unknown: bool = False) -> None:
        self.calls: list[str] = []
        self.refuse = refuse
        self.unknown = unknown

    def tracer(self, kernel: KernelRef, launch: Launch) -> Schedule:
        self.calls.append("trace")
        return trace(kernel, launch)

    def verifier(self, schedule: Schedule, config: VerifyConfig) -> Verdict:
        self.calls.append("verify")
        verdict = verify(schedule, config)
        if not self.unknown:
            return verdict
        props = (PropertyResult(Property.DIRECTION_LEGALITY, Status.UNKNOWN, "timeout"),
                 *verdict.properties[1:])
        return Verdict(verdict.kernel, verdict.launch, props, verdict.queue_depth)

    def simulator(self, schedule: Schedule, config: SimConfig) -> SimResult:
        self.calls.append("simulate")
        if self.refuse:
            raise SimulationRefused("it deadlocks")
        from meshproof.sim.api import simulate

        return simulate(schedule, config)

    def run(self, *, simulate: bool, cache: GateCache | None = None, verify: bool = True,
            depth: int = 3, config: VerifyConfig | None = None) -> CaseOutcome:
        kernel = resolve_kernel("mesh_mlo_1d")
        launch = build_launch(kernel, LaunchOptions(pes=2, queue_depth=depth))
        return run_case(one_launch(kernel, launch), simulate=simulate, verify=verify,
                        cache=cache, verify_config=config or VerifyConfig(),
                        sim_config=SimConfig(timing=False), pipeline=Pipeline(
                            tracer=self.tracer, verifier=self.verifier,
                            simulator=self.simulator))


def test_the_stages_passed_in_are_the_ones_run() -> None:
    stages = Stages()
    outcome = stages.run(simulate=False)
    assert stages.calls == ["trace", "verify"]
    assert outcome.verdict is not None and outcome.ok
    assert [p.name for p in outcome.properties] == list(Property)
    stages = Stages()
    sim_only = stages.run(simulate=True, verify=False)
    assert stages.calls == ["trace", "simulate"]
    assert sim_only.properties == () and sim_only.numeric is not None
    assert sim_only.numeric.ok


def test_a_refused_simulation_is_recorded_as_out_of_tolerance() -> None:
    outcome = Stages(refuse=True).run(simulate=True)
    assert outcome.refused == "it deadlocks"
    numeric = outcome.numeric
    assert numeric is not None and not numeric.ok
    assert numeric.message == "simulation refused: it deadlocks"


def test_a_cached_outcome_is_not_proved_again(tmp_path: Path) -> None:
    cache = GateCache(tmp_path / "cache")
    stages = Stages()
    first = stages.run(simulate=False, cache=cache)
    second = stages.run(simulate=False, cache=cache)
    assert stages.calls == ["trace", "verify", "trace"]  # tracing always runs (the key)
    assert second.cached and not first.cached
    assert second == first  # the cacheable part, compared field by field
    assert second.verdict is None and second.schedule is not None


def test_an_unknown_outcome_is_never_cached(tmp_path: Path) -> None:
    cache = GateCache(tmp_path / "cache")
    stages = Stages(unknown=True)
    stages.run(simulate=False, cache=cache)
    stages.run(simulate=False, cache=cache)
    assert stages.calls.count("verify") == 2
    assert not (tmp_path / "cache").exists()


def test_an_outcome_under_another_input_bound_is_proved_again(tmp_path: Path) -> None:
    """numeric_safety's verdict rests on |inputs| <= B: a proof at 4 says nothing at 16."""
    cache = GateCache(tmp_path / "cache")
    stages = Stages()
    stages.run(simulate=False, cache=cache, config=VerifyConfig(input_bound=4.0))
    wider = stages.run(simulate=False, cache=cache)
    assert stages.calls == ["trace", "verify", "trace", "verify"] and not wider.cached


def test_a_gate_case_of_a_headline_panel_takes_the_panels_input_bound() -> None:
    from meshproof.gate.matrix import GateCase
    from meshproof.gate.runner import case_configs

    launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=2)).spec
    headline = GateCase("h", "mesh_mlo_1d", written=LaunchOptions(
        panel="single_user_decode", scale="headline"))
    plain = GateCase("p", "mesh_mlo_1d")
    assert case_configs(headline, launch)[0].input_bound == 4.0
    assert case_configs(plain, launch)[0].input_bound == 16.0


def _two_lines(second_cube: int) -> LaunchList:
    kernel = resolve_kernel("mesh_mlo_1d")
    return LaunchList("two lines", tuple(
        (kernel, build_launch(kernel, LaunchOptions(pes=4, cube_start=k, queue_depth=3)))
        for k in (0, second_cube)))


def test_run_case_over_several_launches_checks_each_and_their_separation(
        tmp_path: Path) -> None:
    cache = GateCache(tmp_path)
    out = run_case(_two_lines(1), simulate=True, sim_config=SimConfig(timing=False),
                   cache=cache, verify_config=WIDE)
    assert out.launches == 2 and out.ok and out.decided
    assert out.separation is not None and out.separation.status is Status.PROVED
    assert out.verdict is not None and len(out.verdict.verdicts) == 2
    assert all(p.message.startswith("every launch: ") for p in out.properties)
    assert out.numeric is not None and out.numeric.ok
    again = run_case(_two_lines(1), simulate=True, sim_config=SimConfig(timing=False),
                     cache=cache, verify_config=WIDE)
    assert again.cached and again.launches == 2 and again.separation == out.separation
    # one launch through the same function and the same result type: no separation
    single = run_case(one_launch(*_two_lines(1).launches[0]), simulate=False)
    assert single.launches == 1 and single.separation is None and single.verdict is not None
    assert len(single.verdict.verdicts) == 1 and single.verdict.ok


def test_launches_that_overlap_fail_on_launch_separation() -> None:
    from meshproof.gate.judge import CaseStatus, Expectation, judge

    out = run_case(_two_lines(0), simulate=True, sim_config=SimConfig(timing=False))
    assert out.separation is not None and out.separation.status is Status.VIOLATED
    assert not out.ok and "not separated" in out.refused
    judged = judge(Expectation(), out)
    assert judged.status is CaseStatus.FAILED
    assert judged.reasons[0].startswith("launch_separation: expected proved, got violated")

