"""Decode kernels: all-reduce of online-softmax (m, ℓ, o) triplets over a line or a mesh.

Every rank holds the whole Q and one KV slice, computes its partial triplet in one shot,
then the ranks exchange triplets so that every rank merges every other rank's partial
exactly once and stores the final, normalised O.

The bidirectional fan-out: at step s the triplet that originated at rank i reaches rank
i ± s; each rank *forwards what it received* (never its running state), so n-1 steps
suffice on a line of n ranks. Each step sends 3 messages per direction before receiving,
which needs a queue depth of at least 3.
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    Triplet,
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)


def _rank(rank_axis: int, cube_start: int, tl: Any) -> int | None:
    """Launch-local rank, or None for PEs that sit out a cube-level (rank_axis=1) ring."""
    if rank_axis == 1:
        if tl.program_id(axis=0) != 0:
            return None
        local: int = tl.program_id(axis=1) - cube_start  # program_id(1) is physical
        return local
    if rank_axis != 0:
        raise ValueError(f"rank_axis must be 0 (PEs) or 1 (cubes), got {rank_axis}")
    pe: int = tl.program_id(axis=0)
    return pe


def _partial(q_ptr: Any, k_ptr: Any, v_ptr: Any, S_q: int, S_kv_per_rank: int, h_q: int,
             h_kv: int, d_head: int, sm_scale: float | None, tl: Any, *fold: Any) -> Triplet:
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    return partial_attention(q, k_t, v, softmax_scale(d_head, sm_scale), tl, *fold)


def _send3(direction: str, t: Triplet, tl: Any, msg_dtype: str = "f32") -> None:
    # Halving message bytes with f16 is tempting; ℓ then overflows past 65504 (one rank's
    # key count, for near-uniform attention) at long context.
    if msg_dtype != "f32":
        t = (tl.cast(t[0], msg_dtype), tl.cast(t[1], msg_dtype), tl.cast(t[2], msg_dtype))
    tl.send(dir=direction, src=t[0])
    tl.send(dir=direction, src=t[1])
    tl.send(dir=direction, src=t[2])


def _recv3(direction: str, like: Triplet, tl: Any, msg_dtype: str = "f32") -> Triplet:
    m = tl.recv(dir=direction, shape=like[0].shape, dtype=msg_dtype)
    ell = tl.recv(dir=direction, shape=like[1].shape, dtype=msg_dtype)
    o = tl.recv(dir=direction, shape=like[2].shape, dtype=msg_dtype)
    return m, ell, o


def _fanout(state: Triplet, index: int, count: int, up: str, down: str, tl: Any,
            msg_dtype: str = "f32") -> Triplet:
    """Bidirectional fan-out all-reduce along one axis (`up` towards higher index)."""
    has_up = index < count - 1
    has_down = index > 0
    to_up: Triplet | None = state
    to_down: Triplet | None = state
    for step in range(1, count):
        if has_up and to_up is not None:
            _send3(up, to_up, tl, msg_dtype)
        if has_down and to_down is not None:
            _send3(down, to_down, tl, msg_dtype)
        from_down: Triplet | None = None
        from_up: Triplet | None = None
        if index - step >= 0:
            from_down = _recv3(down, state, tl, msg_dtype)
            state = merge(state, from_down, tl)
        if index + step < count:
            from_up = _recv3(up, state, tl, msg_dtype)
            state = merge(state, from_up, tl)
        to_up, to_down = from_down, from_up
    return state


def mesh_mlo_1d(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
                h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int = 0,
                cube_start: int = 0, sm_scale: float | None = None, msg_dtype: str = "f32",
                p_dtype: str = "f16", key_tile: int | None = None, *, tl: Any) -> None:
    """Bidirectional fan-out all-reduce of (m, ℓ, o) over a line of n_ranks (E/W); `msg_dtype`
    the triplets' dtype ("f16" shows ℓ's overflow), `p_dtype`, `key_tile` fold_scores'."""
    rank = _rank(rank_axis, cube_start, tl)
    if rank is None or not 0 <= rank < n_ranks:
        return
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale, tl,
                     p_dtype, key_tile)
    _m, ell, o = _fanout(state, rank, n_ranks, "E", "W", tl, msg_dtype)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_mlo_2d(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
                h_q: int, h_kv: int, d_head: int, mesh_rows: int, mesh_cols: int,
                cube_start: int = 0, rank_axis: int = 1, sm_scale: float | None = None,
                msg_dtype: str = "f32", p_dtype: str = "f16", key_tile: int | None = None, *,
                tl: Any) -> None:
    """Row-then-column fan-out all-reduce over a mesh_rows x mesh_cols cube sub-mesh.
    Launch-local ranks are numbered row-major, so a sub-mesh narrower than its SIP must
    have one row (cube ids of a launch are contiguous); meshproof verify says so if not."""
    if rank_axis != 1:
        raise ValueError("mesh_mlo_2d runs over cubes: rank_axis must be 1")
    if tl.program_id(axis=0) != 0:
        return
    rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    _allreduce_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, rank,
                  mesh_rows, mesh_cols, sm_scale, msg_dtype, tl, p_dtype, key_tile)


def _allreduce_2d(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                  S_kv: int, h_q: int, h_kv: int, d_head: int, rank: int,
                  mesh_rows: int, mesh_cols: int, sm_scale: float | None, msg_dtype: str,
                  tl: Any, *fold: Any) -> None:
    """Partial attention of this rank's slice, then the row-then-column all-reduce."""
    row, col = divmod(rank, mesh_cols)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv, h_q, h_kv, d_head, sm_scale, tl, *fold)
    state = _fanout(state, col, mesh_cols, "E", "W", tl, msg_dtype)   # stage 1: rows
    state = _fanout(state, row, mesh_rows, "S", "N", tl, msg_dtype)   # stage 2: columns
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_mlo_2d_batch(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, mesh_rows: int,
                      mesh_cols: int, cube_start: int = 0, users: int | None = None,
                      sm_scale: float | None = None, msg_dtype: str = "f32", p_dtype: str = "f16",
                      key_tile: int | None = None, *, tl: Any) -> None:
    """Batch on batch: PE p of every cube serves user p (users: all launched PEs unless
    `users` says fewer). User p's KV is split over the cubes of the sub-mesh, and user p's
    row-then-column all-reduce runs over the PEs p of those cubes, so PE p needs links to
    PE p of the neighbouring cubes (cube_mesh_all_pes); cube_mesh links PE 0 only."""
    user = tl.program_id(axis=0)
    if user >= (tl.num_programs(axis=0) if users is None else users):
        return
    rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    if not 0 <= rank < mesh_rows * mesh_cols:
        return
    _allreduce_2d(q_ptr, k_ptr, v_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, rank,
                  mesh_rows, mesh_cols, sm_scale, msg_dtype, tl, p_dtype, key_tile)


def mesh_mlo_2d_physical_rank(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                              S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                              mesh_rows: int, mesh_cols: int, cube_start: int = 0,
                              sm_scale: float | None = None, *, tl: Any) -> None:
    """KNOWN BAD: mesh_mlo_2d that forgets program_id(1) is physical (ignores cube_start)."""
    if tl.program_id(axis=0) != 0:
        return
    rank = int(tl.program_id(axis=1))  # BUG: should subtract cube_start
    row, col = divmod(rank, mesh_cols)
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale, tl)
    state = _fanout(state, col, mesh_cols, "E", "W", tl)
    state = _fanout(state, row, mesh_rows, "S", "N", tl)
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_mlo_1d_forward_running_state(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                      S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                      n_ranks: int, rank_axis: int = 0, cube_start: int = 0,
                                      sm_scale: float | None = None, *, tl: Any) -> None:
    """KNOWN BAD: forwards its merged running state instead of the received triplet."""
    rank = _rank(rank_axis, cube_start, tl)
    if rank is None or not 0 <= rank < n_ranks:
        return
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale, tl)
    has_e, has_w = rank < n_ranks - 1, rank > 0
    to_e: Triplet | None = state
    to_w: Triplet | None = state
    for step in range(1, n_ranks):
        if has_e and to_e is not None:
            _send3("E", to_e, tl)
        if has_w and to_w is not None:
            _send3("W", to_w, tl)
        got_w = got_e = False
        if rank - step >= 0:
            state = merge(state, _recv3("W", state, tl), tl)
            got_w = True
        if rank + step < n_ranks:
            state = merge(state, _recv3("E", state, tl), tl)
            got_e = True
        # BUG: forwards the running state, which already holds the receiver's own partial
        to_e = state if got_w else None
        to_w = state if got_e else None
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_mlo_1d_recv_first(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                           S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, n_ranks: int,
                           rank_axis: int = 0, cube_start: int = 0,
                           sm_scale: float | None = None, *, tl: Any) -> None:
    """KNOWN BAD: receives before sending in each step, so neighbours wait on each other."""
    rank = _rank(rank_axis, cube_start, tl)
    if rank is None or not 0 <= rank < n_ranks:
        return
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale, tl)
    has_e, has_w = rank < n_ranks - 1, rank > 0
    to_e: Triplet | None = state
    to_w: Triplet | None = state
    for step in range(1, n_ranks):
        from_w: Triplet | None = None
        from_e: Triplet | None = None
        if rank - step >= 0:
            from_w = _recv3("W", state, tl)  # BUG: nobody has sent yet
        if rank + step < n_ranks:
            from_e = _recv3("E", state, tl)
        if has_e and to_e is not None:
            _send3("E", to_e, tl)
        if has_w and to_w is not None:
            _send3("W", to_w, tl)
        if from_w is not None:
            state = merge(state, from_w, tl)
        if from_e is not None:
            state = merge(state, from_e, tl)
        to_e, to_w = from_w, from_e
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def mesh_mlo_1d_normalised_merge(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                                 S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int,
                                 n_ranks: int, rank_axis: int = 0, cube_start: int = 0,
                                 sm_scale: float | None = None, *, tl: Any) -> None:
    """KNOWN BAD: merges softmax-normalised o, then divides by ℓ again."""
    rank = _rank(rank_axis, cube_start, tl)
    if rank is None or not 0 <= rank < n_ranks:
        return
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    scores = tl.dot(q, k_t, out_dtype="f32") * softmax_scale(d_head, sm_scale)
    m = tl.max(scores, axis=-1)
    ell = tl.sum(tl.exp(scores - m), axis=-1)
    o = tl.dot(tl.cast(tl.softmax(scores, axis=-1), "f16"), v, out_dtype="f32")  # BUG
    m, ell, o = _fanout((m, ell, o), rank, n_ranks, "E", "W", tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def ring_mlo(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
             h_q: int, h_kv: int, d_head: int, n_ranks: int, rank_axis: int = 0,
             cube_start: int = 0, sm_scale: float | None = None, *, tl: Any) -> None:
    """Closed-ring all-reduce of (m, ℓ, o): pass E, receive from W, n_ranks-1 steps."""
    rank = _rank(rank_axis, cube_start, tl)
    if rank is None or not 0 <= rank < n_ranks:
        return
    state = _partial(q_ptr, k_ptr, v_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, sm_scale, tl)
    outgoing = state
    for _step in range(1, n_ranks):
        tl.send(dir="E", src=outgoing[0])
        tl.send(dir="E", src=outgoing[1])
        tl.send(dir="E", src=outgoing[2])
        incoming = _recv3("W", state, tl)
        state = merge(state, incoming, tl)
        outgoing = incoming
    _m, ell, o = state
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
