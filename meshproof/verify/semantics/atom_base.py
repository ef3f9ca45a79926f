"""The atom machinery: `Atom` (interned: one object per structure, found by a canonical key
string, so equality is identity), frames (the key-row, query-row and group translation of
an SPMD rank's values, one int) and the key strings of coefficients and affine forms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import ClassVar, TypeVar
from weakref import WeakValueDictionary

from meshproof.verify.semantics.index import Aff, Subst

ZERO = Fraction(0)
ONE = Fraction(1)

A = TypeVar("A", bound="Atom")

# A *frame* translates the three absolute coordinates an SPMD rank's values differ by: key
# rows, query rows and the attention problem (group). It is one int, key rows + query
# rows·FRAME + groups·FRAME², so frames compose by integer addition (the memo's hot path
# adds them) and each part is read back as a balanced residue; every part stays far below
# FRAME/2 (rows of a million-key context, thousands of groups).
FRAME = 1 << 40
_HALF = FRAME >> 1


def frame(rows: int, qrows: int = 0, groups: int = 0) -> int:
    """The frame that moves key rows by `rows`, query rows by `qrows`, groups by `groups`."""
    return rows + qrows * FRAME + groups * FRAME * FRAME


def frame_parts(delta: int) -> tuple[int, int, int]:
    """(key rows, query rows, groups) of a frame."""
    rows = ((delta + _HALF) % FRAME) - _HALF
    rest = (delta - rows) // FRAME
    qrows = ((rest + _HALF) % FRAME) - _HALF
    return rows, qrows, (rest - qrows) // FRAME


def fkey(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def aff_key(a: Aff) -> str:
    return str(a.const) + "".join(f"{'+' if c > 0 else ''}{c}x{d}" for d, c in a.terms)


def digits_of(affs: Iterable[Aff]) -> frozenset[int]:
    out: set[int] = set()
    for a in affs:
        out.update(a.digits)
    return frozenset(out)


_INTERNED: WeakValueDictionary[str, Atom] = WeakValueDictionary()


class Atom:
    """An interned symbol: `key` names its structure, `digits` its free digits (BOUND
    included where it sums over a key row). Equal atoms are one object."""

    __slots__ = ("__weakref__", "digits", "key")
    kind: ClassVar[str] = "atom"
    key: str
    digits: frozenset[int]

    @classmethod
    def _intern(cls: type[A], key: str, fill: Callable[[A], None],
                digits: frozenset[int]) -> A:
        hit = _INTERNED.get(key)
        if hit is not None:
            assert isinstance(hit, cls)
            return hit
        atom = object.__new__(cls)
        object.__setattr__(atom, "key", key)
        object.__setattr__(atom, "digits", digits)
        fill(atom)
        _INTERNED[key] = atom
        return atom

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("atoms are immutable")

    def __repr__(self) -> str:
        return self.key

    def __lt__(self, other: Atom) -> bool:
        return self.key < other.key

    def subst(self, s: Subst) -> Atom:
        """The atom with digits replaced by affine forms (only the digits it mentions)."""
        if not self.digits or not any(d in s for d in self.digits):
            return self
        return self._subst(s)

    def _subst(self, s: Subst) -> Atom:
        raise NotImplementedError

    def shift(self, delta: int) -> Atom:
        """The atom moved by the frame `delta`: its absolute key rows, query rows and
        groups (bound rows stay)."""
        return self if not delta else self._shift(delta)

    def _shift(self, delta: int) -> Atom:
        return self

    def rows(self) -> Iterable[int]:
        """The absolute key rows the atom names (lowest row of each coordinate)."""
        return ()

    def qrows(self) -> Iterable[int]:
        """The absolute query rows it names (lowest row of each coordinate)."""
        return ()

    def groups(self) -> Iterable[int]:
        """The attention problems (groups) it names."""
        return ()


def _set(atom: Atom, **fields: object) -> None:
    for name, value in fields.items():
        object.__setattr__(atom, name, value)
