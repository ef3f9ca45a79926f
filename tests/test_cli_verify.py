"""`meshproof verify`: exit codes, verdict-v1 JSON, --smt2, --timeout, bad input, goldens."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import z3
from helpers import (
    CliResult,
    Golden,
    RunCli,
    assert_bad_input,
    kernel_spec,
    trace_kernel,
)

from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import PROPERTY_NAMES
from meshproof.verify.result import Status
from meshproof.verify.z3util import Budget

Run = Callable[[Sequence[str]], CliResult]
STATUSES = {s.value for s in Status}
TOP_KEYS = {"schema", "ok", "kernel", "launch", "properties", "min_queue_depth"}  # DESIGN §8
PROPERTY_KEYS = {"name", "status", "message", "counterexample", "seconds"}
# A table row: property, status, seconds, summary. Timings vary from run to run.
SECONDS_CELL = re.compile(r"^(\w+\s+(?:proved|violated|unknown)\s+)(\d+\.\d\d)", re.M)


def mask_seconds(text: str) -> str:
    """Blank the seconds column (same width, so the table layout is unchanged)."""
    return SECONDS_CELL.sub(lambda m: m.group(1) + "#" * len(m.group(2)), text)


def verify_json(run_cli: Run, *args: str, code: int) -> dict[str, Any]:
    r = run_cli(["verify", *args, "--json"])
    assert r.code == code, r.out + r.err
    assert r.err == ""
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def check_verdict_json(doc: dict[str, Any]) -> None:
    assert set(doc) >= TOP_KEYS, set(doc)
    assert doc["schema"] == "meshproof/verdict-v1"
    assert isinstance(doc["ok"], bool) and isinstance(doc["kernel"], str)
    assert isinstance(doc["launch"], dict) and doc["launch"]["kernel"] == doc["kernel"]
    assert doc["min_queue_depth"] is None or isinstance(doc["min_queue_depth"], int)
    assert [p["name"] for p in doc["properties"]] == list(PROPERTY_NAMES)
    for p in doc["properties"]:
        assert set(p) >= PROPERTY_KEYS, set(p)
        assert p["status"] in STATUSES and isinstance(p["message"], str) and p["message"]
        assert isinstance(p["seconds"], (int, float)) and p["seconds"] >= 0
        if p["status"] == "violated":
            cx = p["counterexample"]
            assert cx["summary"] and cx["diagnostics"]
            for d in cx["diagnostics"]:
                assert d["source"] is None or re.fullmatch(r"[^:]+\.py:[1-9]\d*", d["source"])
        elif p["status"] == "proved":
            assert p["counterexample"] is None
    assert doc["ok"] == all(p["status"] == "proved" for p in doc["properties"])


# --- exit codes and JSON ------------------------------------------------------------------


def test_exit_0_when_all_proved_and_json_schema(run_cli: Run) -> None:
    doc = verify_json(run_cli, "mesh_mlo_2d", "--mesh", "2x4", "--cube-start", "8",
                      "--queue-depth", "3", "--tolerance", "0.1", code=0)
    check_verdict_json(doc)
    assert doc["ok"] is True and doc["min_queue_depth"] == 3
    assert doc["launch"]["cube_start"] == 8 and doc["launch"]["queue_depth"] == 3


def test_exit_1_when_violated(run_cli: Run) -> None:
    doc = verify_json(run_cli, "mesh_mlo_1d", "--queue-depth", "2", code=1)
    check_verdict_json(doc)
    status = {p["name"]: p["status"] for p in doc["properties"]}
    assert status["deadlock_freedom"] == "violated" and doc["ok"] is False
    cx = next(p for p in doc["properties"] if p["name"] == "deadlock_freedom")["counterexample"]
    assert len(cx["blocked"]) == 8 and cx["queue_depth"] == 2


def test_json_is_deterministic_apart_from_timings(run_cli: Run) -> None:
    args = ["verify", "mesh_mlo_2d_physical_rank", "--mesh", "2x4", "--cube-start", "8",
            "--json"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == second.code == 1

    def untimed(text: str) -> str:
        return re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', text)

    assert untimed(first.out) == untimed(second.out)
    assert first.out == json.dumps(json.loads(first.out), sort_keys=True, indent=2) + "\n"


def test_timeout_gives_unknown_and_exit_3_never_0(run_cli: Run) -> None:
    r = run_cli(["verify", "mesh_mlo_1d", "--timeout", "0.000001"])
    assert r.code == 3, r.out + r.err
    assert re.search(r"^deadlock_freedom\s+unknown", r.out, re.M)
    assert "unknown, not proved" in r.out
    doc = verify_json(run_cli, "mesh_mlo_1d", "--timeout", "0.000001", code=3)
    check_verdict_json(doc)
    assert doc["ok"] is False
    assert "unknown" in {p["status"] for p in doc["properties"]}


def test_resource_limit_is_unknown_through_the_api() -> None:
    """A deterministic budget (rlimit) runs out the same way on every machine."""
    schedule = trace_kernel("mesh_mlo_1d", queue_depth=3)
    v = verify(schedule, VerifyConfig(rlimit=1))
    dl = v.property("deadlock_freedom")
    assert dl.status is Status.UNKNOWN and "not certified" in dl.message
    # the semantic properties are exact computations, not solver calls: the budget is moot
    assert v.property("exactly_once_merge").status is Status.PROVED
    assert not v.ok and v.exit_code == 3
    stuck = verify(trace_kernel("mesh_mlo_1d", queue_depth=2), VerifyConfig(rlimit=1))
    assert stuck.property("deadlock_freedom").status is Status.UNKNOWN
    assert stuck.exit_code == 3


def test_violation_outranks_unknown_in_the_exit_code(run_cli: Run) -> None:
    # direction_legality needs no solver: it stays violated while Z3 runs out of time
    r = run_cli(["verify", "ring_mlo", "--wiring", "pe_line", "--timeout", "0.000001"])
    assert r.code == 1, r.out + r.err


# --- --smt2 --------------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "kind", "groups"), [
    (3, "order certificate", ("program_order", "message_order", "queue_capacity_D3",
                              "simulation_timestamps")),
    (2, "stuck-state witness", ("fifo_matching_and_capacity_D2", "every_unfinished_rank_blocked",
                                "simulated_frontier")),
])
def test_smt2_file_parses_back_into_z3(run_cli: Run, tmp_path: Path, depth: int, kind: str,
                                      groups: tuple[str, ...]) -> None:
    path = tmp_path / "cert.smt2"
    r = run_cli(["verify", "mesh_mlo_1d", "--queue-depth", str(depth), "--smt2", str(path),
                 "--tolerance", "0.1"])
    assert r.code == (0 if depth == 3 else 1)
    assert f"wrote the deadlock certificate query to {path}" in r.out
    text = path.read_text(encoding="utf-8")
    assert kind in text.splitlines()[0]
    for g in groups:
        assert f"; group: {g}" in text
    assertions = z3.parse_smt2_file(str(path))
    assert len(assertions) > 100
    solver = z3.Solver()
    solver.add(assertions)
    assert solver.check() == z3.sat  # the certificate / the deadlock witness holds
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_smt2_with_json_notes_go_to_stderr(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "q.smt2"
    r = run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3", "--json", "--smt2", str(path),
                 "--tolerance", "0.1"])
    assert r.code == 0 and path.is_file()
    json.loads(r.out)
    assert "wrote the deadlock certificate query" in r.err


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["mesh_mlo_1d", "--queue-depth", "-1"],
    ["mesh_mlo_1d", "--queue-depth", "70000"],
    ["mesh_mlo_1d", "--queue-depth", "two"],
    ["mesh_mlo_1d", "--timeout", "0"],
    ["mesh_mlo_1d", "--timeout", "-3"],
    ["mesh_mlo_3d"],
    ["mesh_mlo_2d", "--mesh", "2x"],
    ["mesh_mlo_1d", "--smt2", "README.md/q.smt2"],
    ["mesh_mlo_1d", "--only", "deadlock"],
    ["mesh_mlo_1d", "--skip", "direction_legality,nope"],
    ["mesh_mlo_1d", "--only", "channel_matching", "--skip", "channel_matching"],
    [],
])
def test_bad_input_exit_2_one_line(run_cli: Run, args: list[str]) -> None:
    r = run_cli(["verify", *args])
    assert r.code == 2, r.out + r.err
    assert r.out == ""
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("meshproof: error: "), r.err
    assert "Traceback" not in r.err


# --- goldens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "args", "code"), [
    ("verify_mesh_mlo_1d_d2.txt", ["mesh_mlo_1d", "--queue-depth", "2"], 1),
    ("verify_mesh_mlo_2d_2x4_cs8.txt",
     ["mesh_mlo_2d", "--mesh", "2x4", "--cube-start", "8", "--queue-depth", "3",
      "--tolerance", "0.1"], 0),
    ("verify_physical_rank_cs8.txt",
     ["mesh_mlo_2d_physical_rank", "--mesh", "2x4", "--cube-start", "8"], 1),
])
def test_text_golden(run_cli: Run, golden: Golden, name: str, args: list[str],
                     code: int) -> None:
    r = run_cli(["verify", *args])
    assert r.code == code and r.err == ""
    header = r.out.splitlines()[1]
    assert header.split() == ["property", "status", "seconds", "summary"]
    assert len(SECONDS_CELL.findall(r.out)) == len(PROPERTY_NAMES)
    golden(name, mask_seconds(r.out))


def test_order_certificate_of_a_stuck_schedule_parses_and_is_unsat() -> None:
    """Ops that can never complete are asserted false with their names in a comment; the
    comment must not swallow the closing paren (it did once)."""
    from meshproof.model.channels import derive_channels
    from meshproof.model.progress import comm_indices
    from meshproof.verify.deadlock_encoding import DeadlockModel, order_certificate

    schedule = trace_kernel("ring_mlo", wiring="pe_line")  # ops on missing links
    model = DeadlockModel(schedule, derive_channels(schedule), comm_indices(schedule))
    solver, _, text = order_certificate(model, 4, {}, Budget(10.0, 10_000_000))
    assert "ops_that_can_never_complete" in text
    assert solver.check() == z3.unsat


# --- --only / --skip ----------------------------------------------------------------------------


def test_only_and_skip_select_properties_and_say_what_was_not_checked(run_cli: Run) -> None:
    doc = verify_json(run_cli, "mesh_mlo_1d", "--queue-depth", "3", "--only",
                      "deadlock_freedom,channel_matching", code=0)
    assert [p["name"] for p in doc["properties"]] == ["channel_matching", "deadlock_freedom"]
    assert doc["skipped"] == ["direction_legality", "launch_confinement", "exactly_once_merge",
                              "attention_equivalence", "numeric_safety"]
    assert doc["ok"] is True and doc["min_queue_depth"] == 3
    r = run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3", "--skip", "exactly_once_merge",
                 "--skip", "deadlock_freedom", "--tolerance", "0.1"])
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].endswith(
        "queue depth 3; groups: launch; not checked: deadlock_freedom, exactly_once_merge")
    assert "min_queue_depth" not in r.out  # deadlock_freedom was not checked
    # a skipped property cannot hide a violation of another one
    assert run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "2", "--skip",
                    "exactly_once_merge"]).code == 1


def test_unknown_property_names_list_the_names(run_cli: Run) -> None:
    r = run_cli(["verify", "mesh_mlo_1d", "--only", "deadlock"])
    assert r.code == 2
    assert r.err == ("meshproof: error: unknown property 'deadlock'; properties: "
                     + ", ".join(PROPERTY_NAMES) + "\n")


@pytest.mark.parametrize("timeout", ["nan", "inf", "0", "-1"])
def test_timeouts_must_be_positive_and_finite(run_cli: RunCli, timeout: str) -> None:
    # nan and inf were tracebacks (int(nan * 1000) inside the solver set-up).
    assert_bad_input(run_cli(["verify", "mesh_mlo_1d", "--timeout", timeout]),
                     "--timeout must be a positive, finite number of seconds")


def test_smt2_under_a_file_fails_before_tracing(run_cli: RunCli, tmp_path: Path) -> None:
    # Checked up front, like --diagram: a slow verify does not end in a write error. (The
    # kernel would exit 2 itself if traced, with another message.)
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    r = run_cli(["verify", kernel_spec("misbehaving.py::exits_zero"), "--smt2",
                 str(tmp_path / "afile" / "q.smt2")])
    assert_bad_input(r, "afile is a file, not a directory; pass another --smt2 path")
    assert_bad_input(run_cli(["verify", "mesh_mlo_1d", "--smt2", ""]), "it is a directory")
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


def test_smt2_output_is_readable_like_any_other_output(run_cli: RunCli,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "q.smt2"
    assert run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3", "--smt2", str(path),
                    "--tolerance", "0.1"]).code == 0
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # was 0600 (mkstemp's mode)
    assert [p.name for p in tmp_path.iterdir()] == ["q.smt2"]


@pytest.mark.parametrize("command", ["verify", "simulate"])
def test_diagram_writes_only_the_file_asked_for(run_cli: RunCli, tmp_path: Path,
                                                command: str) -> None:
    # x.svg came with an x.dot nobody asked for.
    svg = tmp_path / "x.svg"
    wide = ["--tolerance", "0.1"] if command == "verify" else []
    res = run_cli([command, "mesh_mlo_1d", "--queue-depth", "3", "--diagram", str(svg), *wide])
    assert res.code == 0, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.svg"]
    assert f"rendered {svg} with " in res.out + res.err
    res = run_cli([command, "mesh_mlo_1d", "--queue-depth", "3", "--diagram", str(svg),
                   "--keep-dot"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.dot", "x.svg"]
    assert (tmp_path / "x.dot").read_text(encoding="utf-8").lstrip().startswith("digraph")


@pytest.mark.parametrize("command", ["verify", "simulate"])
def test_keep_dot_without_a_diagram_is_refused(run_cli: RunCli, command: str) -> None:
    # Was accepted and did nothing.
    assert_bad_input(run_cli([command, "mesh_mlo_1d", "--keep-dot"]),
                     "--keep-dot keeps the graphviz source of --diagram; add --diagram")

