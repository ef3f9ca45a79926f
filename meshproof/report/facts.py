"""The study's facts (DESIGN §7), checked against a sweep: each is reproduced or not.

Each check reads the sweep JSON only; a fact whose data is missing reads as not
reproduced, with the reason, rather than silently passing.
"""

from __future__ import annotations

from typing import Any

Fact = tuple[str, bool, str]     # statement, reproduced, what was found when it was not


def _record(sweep: dict[str, Any], name: str) -> dict[str, Any] | None:
    for r in sweep.get("cases", []) + sweep.get("panels", []):
        if r["name"] == name:
            return dict(r)
    return None


def _prop(record: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    if record is None:
        return None
    for p in record.get("verdict", {}).get("properties", []):
        if p["name"] == name:
            return dict(p)
    return None


def _steps_fact(sweep: dict[str, Any], mesh: str, want_2d: int, want_1d: int) -> Fact | None:
    rec = next((r for r in sweep.get("steps_1d_vs_2d", []) if r["mesh"] == mesh), None)
    if rec is None:
        return None
    s1, s2, diam = rec.get("steps_1d"), rec.get("steps_2d"), rec.get("diameter")
    ratio = f"{want_1d / want_2d:.3g}x"
    text = (f"2D all-reduce on {mesh} takes {want_2d} steps vs {want_1d} for the 1D line "
            f"({ratio} fewer), and {want_2d} is the mesh diameter (the lower bound)")
    ok = s1 == want_1d and s2 == want_2d and diam == want_2d
    return text, ok, "" if ok else f"1D {s1}, 2D {s2}, diameter {diam}"


def study_facts(sweep: dict[str, Any]) -> list[Fact]:
    facts: list[Fact] = []
    for mesh, s2, s1 in (("2x4", 4, 7), ("4x4", 6, 15)):
        fact = _steps_fact(sweep, mesh, s2, s1)
        if fact:
            facts.append(fact)
    p = _prop(_record(sweep, "mesh_mlo_1d_8cubes"), "direction_legality")
    if p is not None:
        msg = p["message"]
        ok = p["status"] == "violated" and "cube 3 pe 0 E" in msg and "cube 4 pe 0 W" in msg
        facts.append(("the 1D kernel over 8 cubes of a 4x4 cube mesh uses E at cube 3 and W "
                      "at cube 4, which the wiring lacks (IpcqInvalidDirection)", ok,
                      "" if ok else msg))
    p = _prop(_record(sweep, "mesh_mlo_2d_physical_rank"), "launch_confinement")
    if p is not None:
        ok = p["status"] == "violated" and "-> cube 4" in p["message"]
        facts.append(("the 2D kernel that does not subtract cube_start, launched at cube 8, "
                      "sends N out of its launch (to cube 4)", ok, "" if ok else p["message"]))
    good = _record(sweep, "mesh_mlo_2d_2x4_at8")
    if good is not None:
        ok = bool(good.get("verdict", {}).get("ok"))
        facts.append(("the 2D kernel that subtracts cube_start is correct at cube_start 8",
                      ok, "" if ok else "verdict not ok"))
    depth = _record(sweep, "mesh_mlo_1d")
    shallow = _prop(_record(sweep, "mesh_mlo_1d_depth2"), "deadlock_freedom")
    if depth is not None and shallow is not None:
        min_d = depth.get("verdict", {}).get("min_queue_depth")
        ok = min_d == 3 and shallow["status"] == "violated"
        facts.append(("the bidirectional fan-out (3 messages per direction per step) "
                      "deadlocks at queue depth 2 and is deadlock-free from 3 up", ok,
                      "" if ok else f"min depth {min_d}, depth 2: {shallow['status']}"))
    f32_run = _record(sweep, "mesh_mlo_1d")
    f16_run = _record(sweep, "mesh_mlo_1d_f16_messages")
    if f32_run is not None and f16_run is not None:
        f16_num = (f16_run.get("sim") or {}).get("numeric") or {}
        f32_num = (f32_run.get("sim") or {}).get("numeric") or {}
        ok = f16_num.get("ok") is False and f32_num.get("ok") is True
        facts.append(("at 1M context (131072 keys per rank) ℓ carried in f16 overflows "
                      "float16's max (65504) and the output is lost; carried in f32 it is "
                      "within tolerance", ok,
                      "" if ok else f"f16 run ok={f16_num.get('ok')}, f32 ok={f32_num.get('ok')}"))
    for panel in sweep.get("panels", []):
        if not panel["name"].endswith("_decode"):
            continue
        log = (panel.get("sim") or {}).get("op_log")
        n = panel.get("launch", {}).get("args", {})
        n_ranks = n.get("n_ranks") or (
            (n.get("mesh_rows") or 0) * (n.get("mesh_cols") or 0))
        if log is None or not n_ranks:
            continue
        # a launch may hold several independent groups (headline): count per group
        groups = max(1, int(panel.get("active_ranks", n_ranks)) // n_ranks)
        ok = log["gemm"] == 2 * n_ranks * groups
        facts.append((f"decode panel {panel['panel']} emits exactly 2·n_ranks GEMMs per "
                      f"group ({2 * n_ranks} for n_ranks={n_ranks})", ok,
                      "" if ok else f"{log['gemm']} GEMMs for {groups} group(s)"))
    return facts

