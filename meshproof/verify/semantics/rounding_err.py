"""The rounding domain's record of one value's error (spec/semantics.md §7): `Err` and its
`Kind`, the kind the value of an exact form has, the arithmetic on errors the rules share,
and `ErrorReader`, what the rules read of the analysis about an op's operands (their
magnitudes and lower bounds, dtypes, the relation of the operands).

rounding.py is the domain (its OpSemantics and the rounding every op adds),
rounding_rules.py the exact part of each op on inexact operands, one rule per op kind.
"""


import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from meshproof.model.evaluate import Key
from meshproof.model.schedule import DType, Op, OpKind, ValueRef
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.bounds import lin_interval
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.mask_exactness import exact_mask_value, finite_magnitude
from meshproof.verify.semantics.order import at_least_one, lower_bound
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.readers import RoundingReader, WhyStore
from meshproof.verify.semantics.relations import Related, Relation
from meshproof.verify.semantics.rounding_rules_partners import PartnersBound, partners_bound
from meshproof.verify.semantics.rounding_rules_rescale import Factor, Rescale, state
from meshproof.verify.semantics.symbolic_core import Opaque
from meshproof.verify.semantics.tensor_atoms import Input
from meshproof.verify.semantics.views import describe

_VIEWS = (OpKind.STORE, OpKind.SEND, OpKind.RESHAPE, OpKind.VIEW, OpKind.TRANS, OpKind.NEG,
          OpKind.MAX, OpKind.MAXIMUM, OpKind.MINIMUM)
_LN2 = math.log(2.0)
ROUNDING_ASSUMPTIONS = ("inputs f16 or bf16 values as loaded, f32 exp within 1 ulp, "
                        "round to nearest, f32 accumulation in any order")


class Kind(Enum):
    EXACT = "exact"
    ABS = "abs"          # scores, maxima: absolute error
    REL = "rel"          # weights and their sums: relative error plus a floor
    OSCALE = "oscale"    # unnormalised o: relative to sum p|v|, plus a floor
    OUT = "out"          # normalised o: relative to max|V|, plus a floor


@dataclass(frozen=True, slots=True)
class Err:
    kind: Kind
    eps: float              # ABS: absolute; REL/OSCALE: the tilt (log); OUT: η
    dtype: DType
    floor: float = 0.0
    own: float = 0.0        # REL/OSCALE: this value's own log error
    ref: float = 0.0        # REL/OSCALE: |log C|; ABS: the subtracted operand's part of eps
    lead: float = 0.0       # ABS: the leading operand's part; REL of an exp: the same, in log
    # REL/OSCALE: the part of eps that is the rounding of exp arguments s̃ - max s̃, which
    # moves the weights by at most kstar in total variation (rule E); 0: no rule E
    arg: float = 0.0
    kstar: float = 0.0
    # eps and own by mechanism (culprits.py), each summing to its error; not part of the
    # facts' identity, so attribution never splits a situation of the memo
    parts: tuple[float, ...] = field(default=(), compare=False)
    own_parts: tuple[float, ...] = field(default=(), compare=False)
    # rule F (rounding_rules_rescale.py): a rescale factor's shape; a weight's rescale part
    fx: Factor | None = None
    resc: Rescale | None = None

    @property
    def total(self) -> float:
        """REL/OSCALE: the whole log error of one term, the reference point included."""
        return self.eps + self.own + self.ref


def with_parts(e: Err, parts: tuple[float, ...], own_parts: tuple[float, ...]) -> Err:
    """e with its breakdown by mechanism (dataclasses.replace introspects the fields on
    every call: this runs once per situation)."""
    return Err(e.kind, e.eps, e.dtype, e.floor, e.own, e.ref, e.lead, e.arg, e.kstar, parts,
               own_parts, e.fx, e.resc)


def rounded_err(e: Err, eps: float, floor: float, own: float) -> Err:
    """e with a new eps, floor and own (one op's rounding added; see with_parts)."""
    return Err(e.kind, eps, e.dtype, floor, own, e.ref, e.lead, e.arg, e.kstar, e.parts,
               e.own_parts, e.fx, e.resc)


def _pure_input(form: Rat) -> bool:
    """An input element itself (Q, K or V at some coordinates): exact as loaded."""
    lin = form.as_lin()
    return lin is not None and lin.const == 0 and len(lin.coeffs) == 1 and \
        lin.coeffs[0][1] == 1 and isinstance(lin.coeffs[0][0], Input)


def _positive_terms(form: Rat) -> bool:
    """A finite value whose terms all weigh positively: a sum of such cannot cancel."""
    return not form.inf and all(c > 0 for _, c in form.num.terms)


def _form_kind(form: Rat) -> Kind | None:
    masked = exact_mask_value(form)
    if masked is not None:
        return Kind.EXACT if masked else None
    what = describe(form)
    if what in ("a constant", "an infinite constant") or _pure_input(form):
        return Kind.EXACT   # -inf and exp(-inf) = 0 of a running state started at -inf
    if what in ("Q", "K", "V") or "/" in what:
        return Kind.ABS     # q * scale in f16: rounded like any other linear form
    if what in ("scores", "a running max (m)", "a log-sum-exp value"):
        return Kind.ABS
    if what in ("ℓ", "exponential weights", "softmax probabilities",
                "a normalised sum of exponentials"):
        return Kind.REL
    if what == "o":
        return Kind.OSCALE
    if what == "o (normalised)":
        return Kind.OUT
    return None


class _Reasons(dict[Key, str]):
    """Why values have no rounding bound, when no memo holds them."""



class ErrorReader:
    """What the rounding rules read of the analysis: per operand of the op being computed,
    its form, magnitude and lower bound under |inputs| <= B, its dtype, and the relation
    of the operands (relations.py); and where to say why a value has no bound."""

    def __init__(self, symbolic: RoundingReader, input_bound: float, d_head: int,
                 why: WhyStore | None = None) -> None:
        self.sym = symbolic
        self.b = input_bound
        self.d = d_head
        self.why: WhyStore = why if why is not None else _Reasons()   # why no bound
        self._kinds: dict[str, Kind | None] = {}

    def _res(self, key: Key) -> Value | Opaque | None:
        return self.sym.canonical(key)

    def _fail(self, key: Key, op: Op, reason: str) -> None:
        self.why.setdefault(key, f"{op.source}: {reason}")

    def _mag(self, key: Key) -> float:
        res = self._res(key)
        if res is None or isinstance(res, Opaque):
            return math.inf
        lo, hi = self.sym.interval(key)
        if math.isinf(lo) or math.isinf(hi):
            # a masked value is -inf (exact) or its finite part: round at that's magnitude
            return finite_magnitude(res.form, self.b, self.d)
        return max(abs(lo), abs(hi))

    def _form(self, key: Key) -> Rat:
        res = self._res(key)
        assert res is not None and not isinstance(res, Opaque)
        return res.form

    def _arg_mag(self, op: Op, key: Key, i: int) -> float:
        a = op.args[i]
        return self._mag((key[0], a.id)) if isinstance(a, ValueRef) else abs(a.value)

    def _abs_err(self, op: Op, key: Key, i: int, a: Err) -> float:
        """Operand i's error as an absolute one: an input rounded by a cast (kind EXACT,
        relative eps) is off by eps·|x|, not by eps."""
        return a.eps * self._arg_mag(op, key, i) if a.kind is Kind.EXACT and a.eps else a.eps

    def _lower_bound(self, op: Op, key: Key, i: int) -> float:
        a = op.args[i]
        if not isinstance(a, ValueRef):
            return abs(a.value)

        def low_of(lin: Lin) -> float | None:
            iv = lin_interval(lin, self.b, self.d)
            return None if iv is None else iv[0]

        res = self._res((key[0], a.id))
        return 0.0 if res is None or isinstance(res, Opaque) else lower_bound(res.form, low_of)

    def _at_least_one(self, op: Op, key: Key, i: int) -> bool:
        a = op.args[i]
        if not isinstance(a, ValueRef):
            return abs(a.value) >= 1
        res = self._res((key[0], a.id))
        return res is not None and not isinstance(res, Opaque) and at_least_one(res.form)

    def _dtype_of(self, rank: int, vid: int) -> DType | None:
        return self.sym.dtype_of(rank, vid)

    def _related(self) -> Related:
        return self.sym.related()

    def _inner(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef)
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque) or not res.layout.shape:
            return 1
        return res.layout.shape[-1]

    def _shape_of(self, op: Op, key: Key) -> tuple[int, ...]:
        arg = op.args[0]
        res = self._res((key[0], arg.id)) if isinstance(arg, ValueRef) else None
        return () if res is None or isinstance(res, Opaque) else res.layout.shape

    def _axis_size(self, op: Op, key: Key) -> int:
        arg = op.args[0]
        assert isinstance(arg, ValueRef) and op.axis is not None
        res = self._res((key[0], arg.id))
        if res is None or isinstance(res, Opaque):
            return 1
        return res.layout.shape[op.axis]


def _prod(xs: Iterable[float]) -> float:
    """A product of magnitudes (inf where unbounded)."""
    return math.prod(xs)


def _scaled(err: float, mag: float) -> float:
    """err · mag with 0 · inf = 0: no error, however large the value."""
    return 0.0 if not err else err * mag


def _sum_parts(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    if not a or not b:
        return a or b
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _normalised(o: Err, ell: Err, rel: Relation) -> float:
    """η of o / ℓ (design rules B and D): partners share their tilt, which then costs
    only 2·tanh(S/4)·max|V| (S <= twice the tilt bound); otherwise every per-key error
    counts, and the reference points' common factors unless they are the same number."""
    if rel is Relation.PARTNERS:
        return _partners(o, ell).eta
    t = o.eps + o.own + ell.eps + ell.own
    if rel is not Relation.SAME:
        t += o.ref + ell.ref
    return _expm1(t)


def _partners(o: Err, ell: Err) -> PartnersBound:
    (rsc_o, ef_o, _), (rsc_l, ef_l, k_l) = state(o.resc, o.arg), state(ell.resc, ell.arg)
    # rule F: Σκ is ℓ's (o's magnitude bounds no share), so o may not have settled more
    ok = rsc_o <= rsc_l and ef_o - o.arg <= ef_l - ell.arg
    return partners_bound(max(o.eps, ell.eps), max(o.eps - o.arg, ell.eps - ell.arg),
                          max(o.kstar, ell.kstar), o.own + ell.own,
                          max(o.eps - rsc_o, ell.eps - rsc_l), max(o.eps - ef_o, ell.eps - ef_l),
                          k_l if ok else math.inf)


def _out_times(args: list[Err]) -> float | None:
    """A normalised value times a weight w (an lse merge's exp(lse_i - lse)), per unit of
    w: |õ·w̃ - o·w| <= w·(η·e^t + e^t - 1)·max|V| for w's log error t."""
    outs = [a for a in args if a.kind is Kind.OUT]
    rest = [a for a in args if a.kind is not Kind.OUT]
    if len(outs) != 1 or len(rest) != 1:
        return None
    w = rest[0]
    t = w.total if w.kind in (Kind.REL, Kind.OSCALE) else w.eps
    grow = math.exp(min(t, 700.0))
    return outs[0].eps * grow + grow - 1.0


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf
