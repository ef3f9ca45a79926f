"""The numeric and property keys of a matrix case (gate/case_values.py): input_bound,
score_bound, tolerance, only, skip — checked as strictly as every other key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import RunCli, one_line_error

from meshproof.errors import ConfigError
from meshproof.gate.matrix import load_matrix
from meshproof.verify.properties import Property

HEAD = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\npes = 4\n'


def _matrix(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "proofs.toml"
    path.write_text(HEAD + body, encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "needle"), [
    ('skip = ["deadlock"]\nexpect = "proved"\n',
     "case #1 (a): skip names unknown property 'deadlock' (did you mean "
     "'deadlock_freedom'?); properties: direction_legality, launch_confinement, "
     "channel_matching, deadlock_freedom, exactly_once_merge, attention_equivalence, "
     "numeric_safety"),
    ('only = "numeric_safety"\nexpect = "proved"\n',
     "case #1 (a): only must be a non-empty list of property names; properties: "
     "direction_legality,"),
    ('skip = ["deadlock_freedom"]\nexpect = ["deadlock_freedom"]\n',
     "case #1 (a): expect lists deadlock_freedom, which only/skip leave out; check it or "
     "drop it from expect"),
    ('tolerance = 0\nexpect = "proved"\n',
     "case #1 (a): tolerance must be a positive, finite number, got 0"),
    ('score_bound = -30\nexpect = "proved"\n',
     "case #1 (a): score_bound must be a positive, finite number, got -30"),
    ('input_bound = "16"\nexpect = "proved"\n',
     "case #1 (a): input_bound must be a positive, finite number, got '16'"),
])
def test_a_mistyped_numeric_or_property_key_is_one_line_exit_2(
        run_cli: RunCli, tmp_path: Path, body: str, needle: str) -> None:
    """Realistic mistakes: a property misspelt in skip would silently check it; a
    tolerance of 0 or a negative score bound would make every verdict meaningless."""
    res = run_cli(["gate", str(_matrix(tmp_path, body)), "--no-cache"])
    assert res.code == 2
    assert needle in one_line_error(res)


def test_the_keys_reach_the_verdict_and_the_json(run_cli: RunCli, tmp_path: Path) -> None:
    """The correct idiom: a case states its score range and tolerance; the verdict is
    judged under them and says so; a skipped property is not judged."""
    body = ('score_bound = 30\ntolerance = 0.05\nskip = ["exactly_once_merge"]\n'
            'expect = "proved"\n')
    path = _matrix(tmp_path, body)
    case = load_matrix(path).cases[0]
    assert (case.score_bound, case.rounding_tolerance, case.input_bound) == (30.0, 0.05, None)
    assert case.skip == (Property.EXACTLY_ONCE_MERGE,)
    assert Property.EXACTLY_ONCE_MERGE not in case.checked
    res = run_cli(["gate", str(path), "--no-cache", "--json"])
    assert res.code == 0, res.out + res.err
    doc = json.loads(res.out)
    (row,) = doc["cases"]
    assert row["case"]["score_bound"] == 30.0 and row["case"]["skip"] == ["exactly_once_merge"]
    ns = next(p for p in row["properties"] if p["name"] == "numeric_safety")
    assert ns["status"] == "proved"
    assert "|inputs| <= 16, |scale·q·kᵀ| <= 30; tolerance 5e-2·max|V| (stated)" in \
        ns["message"]
    assert all(p["name"] != "exactly_once_merge" for p in row["properties"])


def test_without_the_tolerance_key_the_case_is_unknown_with_its_bound(
        run_cli: RunCli, tmp_path: Path) -> None:
    """The simulator's 1e-2 is the default: mesh_mlo_1d's bound on 4 PEs over 131,072 keys
    per rank, 1.7e-2 (f32 accumulation in any order), is above it, so the case is unknown
    (exit 3), never passed."""
    body = 'args = { S_kv_per_rank = 131072 }\nexpect = "proved"\n'
    res = run_cli(["gate", str(_matrix(tmp_path, body)), "--no-cache"])
    assert res.code == 3
    assert "the rounding bound 1.7e-2·max|V| exceeds the tolerance 1e-2·max|V|" in res.out


def test_rounding_tolerance_and_its_old_spelling(tmp_path: Path) -> None:
    """`tolerance` (the old spelling) still sets numeric_safety's rounding tolerance;
    both at once is one error, not a silent choice."""
    new = load_matrix(_matrix(tmp_path, 'rounding_tolerance = 0.05\nexpect = "proved"\n'))
    old = load_matrix(_matrix(tmp_path, 'tolerance = 0.05\nexpect = "proved"\n'))
    assert new.cases[0].rounding_tolerance == old.cases[0].rounding_tolerance == 0.05
    assert new.cases[0].to_json()["rounding_tolerance"] == 0.05
    with pytest.raises(ConfigError, match=r"rounding_tolerance and tolerance \(its deprecated "
                       r"spelling\) are both given; keep rounding_tolerance"):
        load_matrix(_matrix(tmp_path, 'tolerance = 0.05\nrounding_tolerance = 0.1\n'
                                      'expect = "proved"\n'))


def test_the_rounding_tolerance_flag_and_its_old_spelling(run_cli: RunCli) -> None:
    for flag in ("--rounding-tolerance", "--tolerance"):
        res = run_cli(["verify", "mesh_mlo_1d", "--pes", "4", "--only", "numeric_safety",
                       flag, "0.05", "--json", "--no-timings"])
        (ns,) = json.loads(res.out)["properties"]
        assert ns["tolerance"] == 0.05 and "(stated)" in ns["assumption"]


def test_every_check_key_is_a_case_key_and_its_flag_and_keyword_exist() -> None:
    """The check keys are one table (gate/case_values.CHECK_KEYS): a case takes each, the
    `verify` command has the flag the row names, and meshproof.testing the keyword; a key
    added to one front end only fails here."""
    import inspect

    from meshproof.cli.verify_cmd import verify_cmd
    from meshproof.gate.case_values import CHECK_KEYS
    from meshproof.gate.matrix import CASE_KEYS
    from meshproof.testing import assert_verified, assert_violates

    flags = {opt for p in verify_cmd.params for opt in p.opts}
    for row in CHECK_KEYS:
        assert row.key in CASE_KEYS
        assert row.flag == "" or row.flag in flags, row.flag
        for helper in (assert_verified, assert_violates):
            assert (row.key in inspect.signature(helper).parameters) is row.testing, row.key
