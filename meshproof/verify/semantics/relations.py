"""Value numbers: which values are the same machine number, outside the situation memo.

The rounding bound reads a weight-carrying value (p, ℓ, o) relative to the machine number
it is normalised by -- its *reference point* -- and splits its rounding into a *tilt*
shared with its partners and an *own* part (spec/semantics.md §7). Whether two reference
points are the same machine number, or one is a narrowing of the other, and whether o and
ℓ were built from the same machine weights by the same machine factors, are facts about
ranks, not about exact forms: two computations of one exact max may differ on the
machine. So they are kept here, per (rank, value id), as *value numbers*:

- a fresh number per op; views (reshape, trans), widening casts and a recv in the sent
  dtype keep their operand's number (the same machine number);
- a narrowing cast records its source and the offset bound;
- a difference `x - y` records both; the exp of one records the factor as rescaling from
  x's number to y's (p = exp(s - m): weights referenced at m);
- every weight value carries its reference point's number and a hash-consed *tilt token*:
  a leaf per exp, `scale(token, factor)` per rescale, `add(token, token)` per union; casts,
  recvs, sums and dots keep it. o and ℓ with equal tokens were built from the same machine
  weights by the same machine factors, in the same tree.

At three ops the relation of the operands joins the memo key (situations.py), so the
rules stay functions of the situation: a rescale `X·α` (same / narrowed / other), a union
`X + Y` (same reference point or not), a normalisation `o / ℓ` (partners, same reference
point, or other). The cost is a few dict operations per op.

Numbering is eager, in evaluation order. Numbering lazily (only the values a relation
reads, cone first) was measured on mesh_mlo_2d at 16x16 and saves nothing: the unions read
the reference points of both operands, whose numbering needs their whole cones, so 99% of
the values get numbered anyway (222,720 of 224,768 in two analyses). The cost is kept down
on the hot path instead: what an op needs is read once per op object (a plan, shared by
the ranks that trace it alike), a number carries its dtype in its low bits and pairs are
packed in ints (no tuple per value for the collector to scan), and `related` reads the
operands once, relates them and numbers the op's result in the same call (a product's and
a union's relation and numbering share their reads of the side tables), so the `note` that
follows has nothing left to do. Replaying the calls of one 32x32 mesh_mlo_2d analysis
costs 1.55 s against 1.85 s before that fusion (every relation and side table equal).
Per-rank lists in place of the per-rank dicts were measured and gain nothing.

What is left at scale: the cost per call grows with the tables (1.1 us at 32x32; at 64x64
from 1.1 us in the first tenth of the calls to about 2 us in the last, 11.4 million calls,
4.1 million weights in `ref` and `token`), probably cache misses (a received partial's
entries were written long before). The next step is to share the numbering between ranks
that trace alike, as the situation memo shares the facts: a rank holds per value (owner -
rank, relative number), a relative number is interned from (op, its operands' relative
numbers, a cast's magnitude, whether the result is 0), every side-table entry is keyed by
the relative number and names other numbers relative to its owner (tokens anchored at their
first leaf's owner, so that equal tokens stay equal), and one memo lookup per (op,
operands' relative numbers) gives the result's number and the relation. Equality within a
rank's frame is then exactly what it is now (owner and relative number both equal), and the
tables shrink to one entry per situation.
"""

from __future__ import annotations

from meshproof.verify.semantics.relations_kinds import NONE, Related, Relation
from meshproof.verify.semantics.relations_shared import ValueNumbers

__all__ = ["NONE", "Related", "Relation", "ValueNumbers"]
