"""JSON Schemas (draft 2020-12) of every JSON meshproof writes, shipped with the package:
`meshproof/schedule-v1` (trace --json), `meshproof/verdict-v1` (verify --json),
`meshproof/simulation-v1` (simulate --json), `meshproof/gate-v2` (gate --json),
`meshproof/sweep-v1` (the report's sweep.json), `meshproof/placements-v1`
(placements --json), and for several launches at once `meshproof/deployment-v1` (verify),
`meshproof/deployment-simulation-v1` (simulate), `meshproof/deployment-trace-v1`
(trace), and `meshproof/synthesis-v1` (synthesize --json). An output's `"schema"` string
names its file: `meshproof/X` is `X.json` here.
Validating needs a JSON Schema library (the tests use `jsonschema`); meshproof itself
only ships the files.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCHEMAS = ("schedule-v1", "verdict-v1", "simulation-v1", "gate-v2", "sweep-v1",
           "placements-v1", "deployment-v1", "deployment-simulation-v1", "deployment-trace-v1",
           "synthesis-v1")


def schema_text(name: str) -> str:
    """The schema for `name` (`verdict-v1` or `meshproof/verdict-v1`) as shipped."""
    short = name.removeprefix("meshproof/")
    if short not in SCHEMAS:
        raise KeyError(f"no schema {name!r}; schemas: {', '.join(SCHEMAS)}")
    return resources.files(__name__).joinpath(f"{short}.json").read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_text(name))
    return data
