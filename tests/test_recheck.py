"""verify/recheck.py, recheck_queries.py and cvc5_solver.py: `--recheck cvc5`.

cvc5 agrees with Z3 on the built-ins' protocol queries; a mocked disagreement, a mocked
cvc5 timeout and an altered query each make the property unknown, never proved; a
violated deadlock's stuck state is re-validated by evaluation; a missing cvc5 is exit 2.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from helpers import trace_kernel, verify_kernel

from meshproof.errors import RecheckUnavailable
from meshproof.model.channels import derive_channels
from meshproof.model.progress import run
from meshproof.schemas import load_schema
from meshproof.verify import cvc5_solver
from meshproof.verify.properties import (
    CheckContext,
    Property,
    RecheckSolver,
    VerifyConfig,
)
from meshproof.verify.recheck import NOT_SMT, recheck_one
from meshproof.verify.recheck_queries import (
    confinement_query,
    legality_query,
    stuck_state_fault,
)
from meshproof.verify.result import RecheckStatus, Status
from meshproof.verify.z3util import Budget, Outcome, SatResult

needs_cvc5 = pytest.mark.skipif(importlib.util.find_spec("cvc5") is None,
                                reason="cvc5 is not installed (pip install 'meshproof[recheck]')")
CONFIG = VerifyConfig(recheck=RecheckSolver.CVC5)
BUDGET = Budget(30.0, 200_000_000)


@needs_cvc5
@pytest.mark.parametrize("kernel,options", [
    ("mesh_mlo_1d", {}),
    ("mesh_mlo_2d", {"mesh": "2x4", "wiring": "cube_mesh"}),
    ("ring_mlo", {"wiring": "pe_ring"}),
])
def test_cvc5_agrees_with_z3_on_the_built_ins(kernel: str, options: dict[str, object]) -> None:
    verdict = verify_kernel(kernel, CONFIG, **options)
    assert verdict.ok
    by_name = {r.name: r for r in verdict.rechecks}
    assert [r.name for r in verdict.rechecks] == [p.name for p in verdict.properties]
    for prop in (Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT,
                 Property.CHANNEL_MATCHING, Property.DEADLOCK_FREEDOM):
        assert by_name[prop].status is RecheckStatus.AGREED, by_name[prop].detail
        assert by_name[prop].describe().startswith("proved (z3; re-checked by cvc5 in ")
    assert by_name[Property.NUMERIC_SAFETY].status is RecheckStatus.NOT_SMT
    assert by_name[Property.NUMERIC_SAFETY].describe() == NOT_SMT
    as_json = verdict.to_json(timings=False)["properties"][3]["recheck"]
    assert as_json["status"] == "agreed" and "seconds" not in as_json
    assert as_json["message"] == "proved (z3; re-checked by cvc5)"
    jsonschema.validate(verdict.to_json(), load_schema("verdict-v1"))


@needs_cvc5
def test_rendezvous_free_random_programs_are_re_checked_at_d0() -> None:
    """Every built-in deadlocks at D = 0; random programs that do not give the rendezvous
    case's order certificate and stuck-state search to both solvers."""
    import randprog

    from meshproof.model.loader import resolve_kernel
    from meshproof.verify.api import verify

    kernel = resolve_kernel(randprog.KERNEL_SPEC)
    checked = 0
    for ex in randprog.seeded_examples(11, 40):
        schedule = randprog.trace_example(ex, kernel)
        table = derive_channels(schedule)
        if table.cols.n == 0 or run(schedule, table, 0).deadlock:
            continue
        for depth in (0, 2):
            verdict = verify(schedule, VerifyConfig(queue_depth=depth, recheck=RecheckSolver.CVC5,
                                                    only=frozenset({Property.DEADLOCK_FREEDOM})))
            (record,) = verdict.rechecks
            assert record.status is RecheckStatus.AGREED, record.detail
            assert record.queries >= 2
        checked += 1
    assert checked >= 3


def _ctx(kernel: str, **options: object) -> CheckContext:
    schedule = trace_kernel(kernel, **options)
    return CheckContext(schedule, derive_channels(schedule), CONFIG, BUDGET)


def _proved(ctx: CheckContext, prop: Property):  # type: ignore[no-untyped-def]
    from meshproof.verify.registry import CHECKS

    result = CHECKS[prop](ctx)
    assert result.status is Status.PROVED
    return result


@pytest.mark.parametrize("answer", [SatResult.SAT, SatResult.UNKNOWN])
@pytest.mark.parametrize("prop", [Property.DEADLOCK_FREEDOM, Property.CHANNEL_MATCHING])
def test_a_second_solver_that_disagrees_or_times_out_makes_it_unknown(
        prop: Property, answer: SatResult) -> None:
    """A mocked second solver answers sat (disagreeing with the unsat the verdict rests on)
    or unknown (its time limit): the property is unknown, with both answers."""
    ctx = _ctx("mesh_mlo_1d")
    result = _proved(ctx, prop)

    def mocked(text: str, budget: Budget) -> Outcome:
        del budget
        wrong = SatResult.SAT if "(check-sat)" in text and answer is SatResult.SAT else answer
        if prop is Property.DEADLOCK_FREEDOM and answer is SatResult.SAT:
            wrong = SatResult.UNSAT    # the order certificate rests on sat
        return Outcome(wrong, "timeout" if wrong is SatResult.UNKNOWN else "")

    after, record = recheck_one(ctx, result, RecheckSolver.CVC5, mocked)
    assert after.status is Status.UNKNOWN
    assert record.status is (RecheckStatus.UNDECIDED if answer is SatResult.UNKNOWN
                             else RecheckStatus.DISAGREED)
    assert "z3 says" in after.message and "cvc5 says" in after.message
    assert after.message.startswith("proved by z3 but not confirmed by the cvc5 re-check (")
    assert "not proved on one solver's word" in after.message


@needs_cvc5
def test_an_altered_query_is_caught_by_the_real_cvc5() -> None:
    """The query cvc5 gets is altered (a constraint that breaks the certificate): cvc5
    says unsat where Z3 said sat, and deadlock_freedom is unknown."""
    ctx = _ctx("mesh_mlo_1d")
    result = _proved(ctx, Property.DEADLOCK_FREEDOM)

    def altered(text: str, budget: Budget) -> Outcome:
        return cvc5_solver.solve_cvc5(text.replace("(check-sat)", "(assert (< 2 1))\n"
                                                   "(check-sat)"), budget)

    after, record = recheck_one(ctx, result, RecheckSolver.CVC5, altered)
    assert record.status is RecheckStatus.DISAGREED and after.status is Status.UNKNOWN
    assert "z3 says sat, cvc5 says unsat" in after.message


@needs_cvc5
def test_cvc5_answers_and_its_resource_limit_ends_in_unknown() -> None:
    query = "(set-logic QF_LIA)\n(declare-const x Int)\n(assert (> x 3))\n(check-sat)\n"
    assert cvc5_solver.solve_cvc5(query, BUDGET).result is SatResult.SAT
    assert cvc5_solver.solve_cvc5(query.replace("> x 3", "and (> x 3) (< x 2)"),
                                  BUDGET).result is SatResult.UNSAT
    hard = ("(set-logic QF_LIA)\n(declare-const x Int)\n(declare-const y Int)\n"
            "(assert (> (* 3 x) (+ y 3)))\n(assert (< (* 3 x) (+ y 5)))\n"
            "(assert (= (mod y 3) 0))\n(check-sat)\n")
    out = cvc5_solver.solve_cvc5(hard, Budget(30.0, 10))
    assert out.result is SatResult.UNKNOWN and out.reason == "resourceout"
    assert cvc5_solver.solve_cvc5("(assert x)", BUDGET).result is SatResult.UNKNOWN


def test_a_violated_deadlock_is_re_validated_by_evaluation() -> None:
    ctx = _ctx("mesh_mlo_1d_recv_first")
    from meshproof.verify.registry import CHECKS

    result = CHECKS[Property.DEADLOCK_FREEDOM](ctx)
    assert result.status is Status.VIOLATED

    def no_solver(text: str, budget: Budget) -> Outcome:
        raise AssertionError("a violation is not handed to a second solver")

    after, record = recheck_one(ctx, result, RecheckSolver.CVC5, no_solver)
    assert after.status is Status.VIOLATED and record.status is RecheckStatus.EVALUATED


def test_a_stuck_state_is_evaluated_and_a_moving_one_is_not_stuck() -> None:
    schedule = trace_kernel("mesh_mlo_1d_recv_first")
    table = derive_channels(schedule)
    stuck = run(schedule, table, 2)
    assert stuck.deadlock and stuck_state_fault(table, 2, stuck.stamps) == ""
    fine = trace_kernel("mesh_mlo_1d")
    fine_table = derive_channels(fine)
    done = run(fine, fine_table, 4)
    assert stuck_state_fault(fine_table, 4, done.stamps) == \
        "every rank finished: no rank is stuck"
    early = np.where(np.arange(len(done.stamps)) < 2, done.stamps, -1)  # stop after 2 ops
    assert stuck_state_fault(fine_table, 4, early) != ""


def test_the_enumerations_evaluate_violations_and_correct_launches() -> None:
    good = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="cube_mesh")
    bad = trace_kernel("mesh_mlo_2d", mesh="2x4", wiring="pe_line")
    assert not legality_query(good, derive_channels(good).cols).violated
    assert legality_query(bad, derive_channels(bad).cols).violated
    assert not confinement_query(good, derive_channels(good).cols).violated
    confined = trace_kernel("mesh_mlo_2d_physical_rank")
    assert confinement_query(confined, derive_channels(confined).cols).violated


def test_without_cvc5_the_recheck_is_one_line_and_exit_2(
        run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "cvc5" else real(name, *a))
    with pytest.raises(RecheckUnavailable):
        cvc5_solver.require_cvc5()
    r = run_cli(["verify", "mesh_mlo_1d", "--recheck", "cvc5"])
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [f"meshproof: error: {cvc5_solver.MISSING}"]
    r = run_cli(["verify", "mesh_mlo_1d", "--recheck", "yices"])
    assert r.code == 2 and "unknown solver 'yices'; solvers: cvc5" in r.err


@needs_cvc5
def test_the_gate_key_rechecks_and_reports_a_line_in_junit_sarif_and_json(
        run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    matrix = tmp_path / "m.toml"
    matrix.write_text('[[case]]\nname = "line"\nkernel = "mesh_mlo_1d"\nrecheck = "cvc5"\n'
                      'expect = "proved"\n\n[[case]]\nname = "d2"\nkernel = "mesh_mlo_1d"\n'
                      'queue_depth = 2\nrecheck = "cvc5"\nexpect = ["deadlock_freedom"]\n')
    junit, sarif = tmp_path / "j.xml", tmp_path / "s.sarif"
    r = run_cli(["gate", str(matrix), "--json", "--junit", str(junit), "--sarif", str(sarif),
                 "--no-cache"])
    assert r.code == 0, r.out + r.err
    doc = json.loads(r.out)
    jsonschema.validate(doc, load_schema("gate-v2"))
    line = {p["name"]: p["recheck"] for p in doc["cases"][0]["properties"]}
    assert line["deadlock_freedom"] == "proved (z3; re-checked by cvc5)"
    assert line["numeric_safety"].startswith("not re-checkable by SMT")
    assert doc["cases"][1]["properties"][3]["recheck"].startswith(
        "violated: the stuck state at D=2 re-validated by evaluating it")
    assert "re-check: proved (z3; re-checked by cvc5)" in junit.read_text()
    runs = json.loads(sarif.read_text())["runs"][0]
    assert "line: channel_matching: proved (z3; re-checked by cvc5)" in \
        runs["properties"]["rechecks"]


def test_the_gate_key_names_a_known_solver(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    matrix = tmp_path / "m.toml"
    matrix.write_text('[[case]]\nname = "x"\nkernel = "mesh_mlo_1d"\nrecheck = "z4"\n'
                      'expect = "proved"\n')
    r = run_cli(["gate", str(matrix)])
    assert r.code == 2
    assert "case #1 (x): recheck: unknown solver 'z4'; solvers: cvc5" in r.err


def test_a_violated_enumeration_is_re_validated_by_evaluating_it() -> None:
    ctx = _ctx("ring_mlo", wiring="pe_line")       # the ring's wrap-around link is missing
    from meshproof.verify.registry import CHECKS

    result = CHECKS[Property.DIRECTION_LEGALITY](ctx)
    assert result.status is Status.VIOLATED
    after, record = recheck_one(ctx, result, RecheckSolver.CVC5,
                                lambda text, budget: Outcome(SatResult.UNKNOWN, "unused"))
    assert after.status is Status.VIOLATED and record.status is RecheckStatus.EVALUATED
    assert record.describe() == ("violated: the counterexample re-validated by evaluating it "
                                 "(no second solver)")


def test_an_enumeration_that_evaluates_otherwise_makes_a_proof_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The exported enumeration says violated where the property said proved (an
    encoding slip on one side): unknown, not proved."""
    from meshproof.verify import recheck
    from meshproof.verify.recheck_queries import Enumerated

    ctx = _ctx("mesh_mlo_1d")
    result = _proved(ctx, Property.LAUNCH_CONFINEMENT)
    real = recheck.confinement_query
    monkeypatch.setattr(recheck, "confinement_query",
                        lambda s, c: Enumerated(real(s, c).query, True))
    after, record = recheck_one(ctx, result, RecheckSolver.CVC5,
                                lambda text, budget: Outcome(SatResult.UNSAT, ""))
    assert record.status is RecheckStatus.DISAGREED and after.status is Status.UNKNOWN
    assert "the exported enumeration evaluates to a violation" in after.message
