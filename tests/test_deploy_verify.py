"""Several launches verified together: each launch's properties plus launch_separation;
and the headline multi-user panels, all 8 kv groups at once."""

from __future__ import annotations

import pytest
from helpers import WIDE

from meshproof.deploy.deployment import Deployment, build_deployment
from meshproof.deploy.launches import panel_launches
from meshproof.deploy.verify import verify_deployment
from meshproof.exitcodes import ExitCode
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.panels import get_panel
from meshproof.verify.properties import Property, VerifyConfig
from meshproof.verify.result import Status

SHAPES = (("S_kv_per_rank", 8), ("d_head", 4), ("h_q", 2), ("h_kv", 1), ("S_q", 1))


def _deploy(kernel: str, starts: tuple[int, ...], **kw: object) -> Deployment:
    ref = resolve_kernel(kernel)
    launches = [(ref, build_launch(ref, LaunchOptions(mesh="2x4", cube_start=k, args=SHAPES,
                                                      **kw)))  # type: ignore[arg-type]
                for k in starts]
    return build_deployment("test", launches, trace)


def test_two_batch_groups_on_one_sip_are_proved_together() -> None:
    result = verify_deployment(_deploy("mesh_mlo_2d_batch", (0, 8)), WIDE)
    assert result.ok and result.exit_code is ExitCode.OK
    assert [v.launch.cube_start for v in result.verdicts] == [0, 8]
    assert all(v.ok and v.launch.groups.value == "pe" for v in result.verdicts)
    doc = result.to_json(timings=False)
    assert doc["schema"] == "meshproof/deployment-v1" and doc["endpoints"] == 128
    assert [d["launch"]["cube_start"] for d in doc["launches"]] == [0, 8]


def test_overlapping_launches_each_proved_alone_are_violated_together() -> None:
    """Rows 0-1 and rows 1-2 are each a legal 2x4 launch; at once they share cubes 4..7,
    which no single launch's verdict can see."""
    result = verify_deployment(_deploy("mesh_mlo_2d", (0, 4)), WIDE)
    assert result.failing() == () and all(v.ok for v in result.verdicts)
    assert result.separation.status is Status.VIOLATED
    assert not result.ok and result.exit_code is ExitCode.VIOLATED


def test_the_deployment_refuses_launches_on_different_systems_or_depths() -> None:
    from meshproof.errors import LaunchError
    from meshproof.model.topology import System

    ref = resolve_kernel("mesh_mlo_2d")
    a = build_launch(ref, LaunchOptions(mesh="2x4", args=SHAPES))
    b = build_launch(ref, LaunchOptions(mesh="2x4", args=SHAPES, system=System(2, 4, 4, 8)))
    c = build_launch(ref, LaunchOptions(mesh="2x4", args=SHAPES, cube_start=8, queue_depth=3))
    with pytest.raises(LaunchError, match=r"launch 2 runs on system 2x4x4 .* give them one "
                                          r"--system"):
        build_deployment("x", [(ref, a), (ref, b)], trace)
    with pytest.raises(LaunchError, match="launch 2 has queue depth 3 but launch 1 has 4"):
        build_deployment("x", [(ref, a), (ref, c)], trace)


@pytest.fixture(scope="module")
def headline_decode() -> Deployment:
    ll = panel_launches(get_panel("multi_user_decode", "headline"), "headline")
    return build_deployment(ll.name, ll.launches, trace)


def test_headline_multi_user_decode_is_8_groups_with_all_512_endpoints_communicating(
        headline_decode: Deployment) -> None:
    schedules = headline_decode.schedules
    assert [s.launch.cube_start for s in schedules] == [0, 8, 16, 24, 32, 40, 48, 56]
    assert all(s.launch.wiring == "cube_mesh_all_pes" for s in schedules)
    communicating = {p.endpoint for s in schedules for p in s.programs if p.comm_ops}
    assert len(communicating) == 512 == headline_decode.endpoints


def test_headline_multi_user_decode_is_fully_proved(headline_decode: Deployment) -> None:
    panel = get_panel("multi_user_decode", "headline")
    # at the default tolerance: f32 p and 4096-key tiles bound it by 1.5e-3·max|V| (issue 27)
    result = verify_deployment(headline_decode, VerifyConfig(input_bound=panel.input_bound))
    assert result.ok, [v.violated() for v in result.verdicts]
    assert result.carried_from == (None, *(0,) * 7)   # groups 2-8: group 1 moved
    for verdict in result.verdicts:
        assert {p.name for p in verdict.properties} == set(Property)
        assert "8 group(s) by pe (8 rank(s) with 8 KV shard(s))" in \
            verdict.property(Property.ATTENTION_EQUIVALENCE).message
        assert "for |inputs| <= 4;" in verdict.property(Property.NUMERIC_SAFETY).message


def test_at_the_default_input_bound_the_headline_rounding_bound_grows_with_the_scores(
        headline_decode: Deployment) -> None:
    """|x| <= 16 at d_head 128: scores up to 2896, whose rounding dominates the bound
    (8.98e-3·max|V| with rule F, against 1.5e-3 at the panel's |x| <= 4): within the
    simulator's 1e-2, so proved, and stated for |inputs| <= 16."""
    from meshproof.verify.api import verify

    verdict = verify(headline_decode.schedules[0],
                     VerifyConfig(only=frozenset({Property.NUMERIC_SAFETY})))
    ns = verdict.property(Property.NUMERIC_SAFETY)
    assert ns.status is Status.PROVED and "for |inputs| <= 16;" in ns.message
    assert "|computed - exact| <= 0.00898·max|V|" in ns.message


def test_headline_multi_user_prefill_has_64_cubes_busy_and_is_fully_proved() -> None:
    ll = panel_launches(get_panel("multi_user_prefill", "headline"), "headline")
    deployment = build_deployment(ll.name, ll.launches, trace)
    busy = {p.endpoint.cube for s in deployment.schedules for p in s.active}
    assert busy == set(range(64))
    result = verify_deployment(deployment, VerifyConfig(input_bound=4.0))
    assert result.ok, [v.violated() for v in result.verdicts]


def test_kv_groups_carry_the_first_groups_proofs_unless_told_not_to() -> None:
    deployment = _deploy("mesh_mlo_2d_batch", (0, 8))
    carried = verify_deployment(deployment, WIDE)
    assert carried.carried_from == (None, 0)
    assert carried.verdicts[1].properties[0].certificate.startswith("as at cube_start 0")
    checked = verify_deployment(deployment, WIDE, reuse=False)
    assert checked.carried_from == (None, None)
    assert [[p.status for p in v.properties] for v in checked.verdicts] == \
        [[p.status for p in v.properties] for v in carried.verdicts]


def test_a_violated_launch_carries_nothing() -> None:
    deployment = _deploy("mesh_mlo_2d_batch", (0, 8), wiring="cube_mesh")
    result = verify_deployment(deployment)
    assert result.carried_from == (None, None) and result.failing() == (0, 1)
