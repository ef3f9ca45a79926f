from kernels.attn import decode_allreduce

from meshproof.testing import assert_verified, assert_violates

ARGS = {"S_q": 1, "S_kv_per_rank": 64, "h_q": 8, "h_kv": 1, "d_head": 16}


def test_decode_allreduce_is_proved():
    verdict = assert_verified(decode_allreduce, wiring="pe_line", pes=8, args=ARGS,
                              tolerance=0.1)   # numeric_safety's bound here: 7.4e-2·max|V|
    assert verdict.min_queue_depth <= 3


def test_recv_first_variant_deadlocks():
    assert_violates("kernels/attn_bad.py::decode_recv_first", "deadlock_freedom", pes=8,
                    args=ARGS)
