"""A user's decode and prefill kernels whose KV buffers are called kc_ptr and vc_ptr.

Simulated with `--sharded kc_ptr,vc_ptr` (the harness fills the named buffers) and, for
the prefill kernel, `--harness prefill` (tests/test_sim_cli.py).
"""

from __future__ import annotations

from typing import Any

from meshproof.kernels.mesh_kv import mesh_kv
from meshproof.kernels.mesh_mlo import mesh_mlo_1d


def decode_cache(q_ptr: Any, kc_ptr: Any, vc_ptr: Any, o_ptr: Any, n_ranks: int, S_q: int = 1,
                 S_kv_per_rank: int = 16, h_q: int = 8, h_kv: int = 1, d_head: int = 8, *,
                 tl: Any) -> None:
    """The 1D decode all-reduce over KV cache buffers kc_ptr, vc_ptr."""
    mesh_mlo_1d(q_ptr, kc_ptr, vc_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks,
                tl=tl)


def prefill_cache(q_ptr: Any, kc_ptr: Any, vc_ptr: Any, o_ptr: Any, n_ranks: int,
                  S_q: int = 4, S_kv_per_rank: int = 4, h_q: int = 2, h_kv: int = 1,
                  d_head: int = 8, *, tl: Any) -> None:
    """The circulating-KV prefill over KV cache buffers kc_ptr, vc_ptr."""
    mesh_kv(q_ptr, kc_ptr, vc_ptr, o_ptr, S_q, S_kv_per_rank, h_q, h_kv, d_head, n_ranks, tl=tl)
