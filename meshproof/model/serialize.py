"""Schedule IR <-> JSON (`meshproof/schedule-v1`). Keys sorted for byte-identical output."""

from __future__ import annotations

from typing import Any

from meshproof.model.schedule import Const, Op, OpKind, Schedule, json_scalar

SCHEDULE_SCHEMA = "meshproof/schedule-v1"


def op_to_json(op: Op) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": op.index,
        "kind": op.kind.value,
        "shape": list(op.shape),
        "dtype": op.dtype.value,
        "source": str(op.source),
        "args": [{"const": json_scalar(a.value)} if isinstance(a, Const) else {"value": a.id}
                 for a in op.args],
    }
    if op.out is not None:
        out["out"] = op.out
    if op.dir is not None:
        out["dir"] = op.dir.value
    if op.kind.is_comm:
        out["bytes"] = op.nbytes
    if op.axis is not None:
        out["axis"] = op.axis
        out["keepdims"] = op.keepdims
    if op.perm is not None:
        out["perm"] = list(op.perm)
    if op.ptr is not None:
        out["ptr"] = op.ptr
        out["offset"] = op.offset
    elif op.kind is OpKind.VIEW:
        out["offset"] = op.offset
    if op.fill is not None:
        out["fill"] = json_scalar(op.fill)
    return out


def schedule_to_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "schema": SCHEDULE_SCHEMA,
        "launch": schedule.launch.to_json(),
        "ranks": [
            {"cube": p.endpoint.cube, "pe": p.endpoint.pe,
             "ops": [op_to_json(op) for op in p.ops]}
            for p in schedule.programs if p.ops
        ],
    }


def dumps(obj: Any) -> str:
    import json  # here: a verdict printed as text never pays for json's import

    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n"
