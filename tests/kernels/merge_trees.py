"""One rank merges the partials of its KV tiles along an arbitrary merge tree.

`plan` is a tree in prefix form: a tile `t<i>`, an empty partial `e` (the online-softmax
identity: m = -inf, ℓ = 0, o = 0), or `(A B)` for the merge of two subtrees. The merge
guards its max with a finite floor, so two empty partials merge to an empty one instead of
exp(-inf - (-inf)). `mutation` (with `at`, the index of the merge it applies to) injects
one realistic mistake into one merge: drop the rescale of o, weigh a partial twice, swap m
and ℓ of the incoming side, use exp2 for one weight, or normalise before merging.

`reprs` picks, merge by merge (cycling), the representation the merge is written in:
`m` the (m, ℓ, o) online-softmax merge; `l` the log-sum-exp merge of (lse, O normalised);
`p` ring-flash-attention's log(1 + exp) update; `s` its sigmoid update; `r` the lerp
merge of normalised partials. A merge in another representation converts both sides
(lse = m + log ℓ, O = o / ℓ, guarded for empty partials) and hands back (lse, 1, O): the
same partial, so any mix of representations along any tree computes attention. The
mutated merge is always an (m, ℓ, o) merge.
"""

from __future__ import annotations

import math
from typing import Any

from meshproof.kernels.attention_parts import load_q

Triplet = tuple[Any, Any, Any]
FLOOR = -1e30


def _parse(plan: str) -> Any:
    tokens = plan.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node() -> Any:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            left, right = node(), node()
            pos += 1  # ")"
            return (left, right)
        return tok

    tree = node()
    if pos != len(tokens):
        raise ValueError(f"trailing tokens in plan {plan!r}")
    return tree


def merge_tree(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, plan: str = "(t0 t1)",
               tiles: int = 2, mutation: str = "", at: int = 0, reprs: str = "m",
               S_q: int = 1, S_kv_per_rank: int = 16, h_q: int = 2, h_kv: int = 1,
               d_head: int = 8, *, tl: Any) -> None:
    """Merge the partials of `tiles` tiles of this rank's KV slice along `plan`."""
    tile = S_kv_per_rank // tiles
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    rows = S_q * (h_q // h_kv)
    scale = 1.0 / math.sqrt(d_head)
    counter = [0]

    def leaf(name: str) -> Triplet:
        if name == "e":
            return (tl.full((h_kv, rows, 1), float("-inf"), "f32"),
                    tl.zeros((h_kv, rows, 1), "f32"), tl.zeros((h_kv, rows, d_head), "f32"))
        i = int(name[1:])
        off = i * tile * h_kv * d_head
        k = tl.load(k_ptr + off, shape=(tile, h_kv, d_head), dtype="f16")
        v = tl.load(v_ptr + off, shape=(tile, h_kv, d_head), dtype="f16")
        s = tl.dot(q, tl.trans(k, (1, 2, 0)), out_dtype="f32") * scale
        m = tl.max(s, axis=-1)
        p = tl.exp(s - m)
        return m, tl.sum(p, axis=-1), tl.dot(p, tl.trans(v, (1, 0, 2)), out_dtype="f32")

    def merge(a: Triplet, b: Triplet) -> Triplet:
        index = counter[0]
        counter[0] += 1
        bug = mutation if index == at else ""
        kind = reprs[index % len(reprs)] if reprs and not bug else "m"
        if kind != "m":
            return _other(kind, a, b, tl)
        if bug == "swap":
            b = (b[1], b[0], b[2])
        m_new = tl.maximum(tl.maximum(a[0], b[0]), FLOOR)
        x = tl.exp(a[0] - m_new)
        y = tl.exp2(b[0] - m_new) if bug == "exp2" else tl.exp(b[0] - m_new)
        if bug == "twice":
            y = y * 2.0
        o_b = b[2] / b[1] if bug == "normalise" else b[2]
        o_a = a[2] if bug == "drop_rescale" else a[2] * x
        return m_new, a[1] * x + b[1] * y, o_a + o_b * y

    def walk(t: Any) -> Triplet:
        if isinstance(t, tuple):
            return merge(walk(t[0]), walk(t[1]))
        return leaf(t)

    _m, ell, o = walk(_parse(plan))
    out = tl.reshape(o / ell, (h_kv, S_q, h_q // h_kv, d_head))
    tl.store(o_ptr, tl.cast(tl.trans(out, (1, 0, 2, 3)), "f16"))


TINY = 1e-30


def _lse(t: Triplet, tl: Any) -> tuple[Any, Any]:
    """(lse, O normalised) of a partial, guarded so an empty one is (-inf, 0)."""
    ell = tl.maximum(t[1], TINY)
    return t[0] + tl.log(ell), t[2] / ell


def _other(kind: str, a: Triplet, b: Triplet, tl: Any) -> Triplet:
    (la, oa), (lb, ob) = _lse(a, tl), _lse(b, tl)
    # every division and log is guarded: two empty sides merge to an empty partial
    mx = tl.maximum(tl.maximum(la, lb), FLOOR)
    w = tl.maximum(tl.exp(la - mx) + tl.exp(lb - mx), TINY)
    if kind == "l":            # textbook log-sum-exp
        w1, w2 = tl.exp(la - mx), tl.exp(lb - mx)
        lse, out = mx + tl.log(w), (oa * w1 + ob * w2) / w
    elif kind == "p":          # ring-flash-attention: log(1 + exp(b - a)) about the max
        lse = mx + tl.log(w)
        out = tl.exp(la - lse) * oa + tl.exp(lb - lse) * ob
    elif kind == "s":          # ring-flash-attention's sigmoid form (lse floored: an
        # empty side's -inf - (-inf) would be nan)
        share = tl.sigmoid(tl.maximum(lb, FLOOR) - tl.maximum(la, FLOOR))
        out = oa - share * (oa - ob)
        lse = mx + tl.log(w)
    else:                      # "r": lerp of normalised partials
        m = tl.maximum(tl.maximum(a[0], b[0]), FLOOR)
        w1, w2 = a[1] * tl.exp(a[0] - m), b[1] * tl.exp(b[0] - m)
        w = tl.maximum(w1 + w2, TINY)
        lse, out = m + tl.log(w), oa + (ob - oa) * (w2 / w)
    return lse, tl.full(lse.shape, 1.0, "f32"), out


MUTATIONS = ("drop_rescale", "twice", "swap", "exp2", "normalise")
REPRESENTATIONS = "mlpsr"
