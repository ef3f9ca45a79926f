"""Argument rules of the tl ops: each op takes exactly its documented parameters.

kernbench's ops (which follow Triton's names) take more keywords than meshproof models.
Dropping one silently changes what the kernel means: `tl.store(p, x, mask=m)` traced as an
unconditional store would come out proved. So a keyword is either a parameter, a *hint*
that cannot change what is computed (accepted and ignored, spec/tl.md §4), or refused with
one line that names the op, the argument and why. Positional arguments beyond the
documented ones are refused the same way, never absorbed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from meshproof.errors import UnsupportedArgument

# Hints: where data lives in the cache hierarchy, never which elements are read or written,
# nor their values. Only load and store take them.
MEMORY_HINTS = ("cache_modifier", "eviction_policy")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a keyword kernbench knows is not modelled, and what to write instead."""

    reason: str
    fix: str


_MASKED_LOAD = Refusal(
    "masked loads are outside meshproof's rules (every element of the shape would count as "
    "read)",
    "load exactly the elements the rank needs with tl.load(ptr + offset, shape=...)")
_BOUNDS = Refusal("bounds-checked (block-pointer) accesses are outside meshproof's rules",
                  "access exactly the in-bounds elements with ptr + offset and a shape that "
                  "fits")
_KEEP_DIMS = Refusal("meshproof spells it keepdims= (and keeps the reduced axis by default)",
                     "write keepdims=True or keepdims=False")
_PRECISION = Refusal("a reduced-precision dot computes other values than the f32-accumulated "
                     "dot meshproof models", "remove it")
_ARGMAX = Refusal("arg-max (return_indices=) is not modelled", "remove it: tl.max returns the "
                  "maxima only")

# Keywords of kernbench's (Triton's) ops that change what is computed, per op.
REFUSED: Mapping[str, Mapping[str, Refusal]] = {
    "load": {
        "mask": _MASKED_LOAD,
        "other": Refusal("other= fills the masked-off elements of a masked load, and masked "
                         "loads are outside meshproof's rules", _MASKED_LOAD.fix),
        "boundary_check": _BOUNDS,
        "padding_option": _BOUNDS,
        "volatile": Refusal("volatile loads are not modelled (memory is a private per-rank "
                            "buffer)", "remove it"),
    },
    "store": {
        "mask": Refusal("masked stores are outside meshproof's rules (every element of the "
                        "value would count as written)",
                        "store exactly the elements the rank writes with tl.store(ptr + "
                        "offset, value) and a value of that shape"),
        "boundary_check": _BOUNDS,
    },
    "dot": {
        "acc": Refusal("an accumulating dot (acc=) is not modelled",
                       "add the accumulator yourself: acc + tl.dot(a, b)"),
        "input_precision": _PRECISION,
        "allow_tf32": _PRECISION,
        "max_num_imprecise_acc": _PRECISION,
    },
    "max": {"keep_dims": _KEEP_DIMS, "return_indices": _ARGMAX,
            "return_indices_tie_break_left": _ARGMAX},
    "sum": {"keep_dims": _KEEP_DIMS,
            "dtype": Refusal("a reduction dtype is not modelled (tl.sum keeps its operand's "
                             "dtype)", "cast first: tl.sum(tl.cast(x, 'f32'), axis=...)")},
    "softmax": {
        "dim": Refusal("meshproof spells it axis=", "write axis=..."),
        "keep_dims": Refusal("tl.softmax keeps its operand's shape", "remove it"),
        "ieee_rounding": Refusal("the rounding of the softmax's division is not modelled",
                                 "remove it"),
    },
    "cast": {
        "bitcast": Refusal("bit casts are not modelled", "use a value cast: tl.cast(x, dtype)"),
        "fp_downcast_rounding": Refusal("rounding modes other than round-to-nearest are not "
                                        "modelled", "remove it"),
    },
    "maximum": {"propagate_nan": Refusal("NaN propagation modes are not modelled",
                                         "remove it")},
    "minimum": {"propagate_nan": Refusal("NaN propagation modes are not modelled",
                                         "remove it")},
    "reshape": {"can_reorder": Refusal("a reshape that may reorder elements is not modelled",
                                       "remove it: tl.reshape keeps row-major order")},
}


class _Where(Protocol):
    def where(self) -> str: ...

    def refuse(self, error: UnsupportedArgument) -> UnsupportedArgument: ...


class _HasTracer(Protocol):
    @property
    def _t(self) -> _Where: ...


@dataclass(frozen=True, slots=True)
class OpSignature:
    """The documented parameters of one op, read from the method that implements it."""

    op: str
    positional: tuple[str, ...]     # positional-or-keyword, in order
    required: int                   # the first `required` of them have no default
    keyword_only: tuple[str, ...]
    hints: tuple[str, ...]
    params: str                     # e.g. "(a, b, *, out_dtype=None)"

    @staticmethod
    def of(op: str, fn: Callable[..., Any], hints: tuple[str, ...]) -> OpSignature:
        params = list(inspect.signature(fn).parameters.values())[1:]  # drop self
        positional = tuple(p.name for p in params
                           if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
        keyword_only = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
        if len(positional) + len(keyword_only) != len(params):
            raise TypeError(f"tl.{op}: ops take named parameters only")  # a meshproof bug
        required = sum(1 for p in params if p.default is inspect.Parameter.empty)
        parts = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                 for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        if keyword_only:
            parts.append("*")
            parts += [f"{p.name}={p.default!r}" for p in params
                      if p.kind is inspect.Parameter.KEYWORD_ONLY]
        return OpSignature(op, positional, required, keyword_only, hints,
                           f"({', '.join(parts)})")

    @property
    def takes(self) -> str:
        """"tl.OP takes (PARAMS)", plus the hints it accepts."""
        hints = (f" and the hints {', '.join(h + '=' for h in self.hints)} (ignored)"
                 if self.hints else "")
        return f"tl.{self.op} takes {self.params}{hints}"

    def problem(self, args: tuple[object, ...], kwargs: Mapping[str, object]) -> str | None:
        """What is wrong with this call, as the text after "error: ", or None if nothing."""
        n = len(args)
        if n > len(self.positional):
            fix = "remove the extra arguments"
            if self.keyword_only:
                fix += f" ({', '.join(k + '=' for k in self.keyword_only)} go by keyword)"
            return (f"tl.{self.op} with {n} positional arguments is not modelled: "
                    f"{self.takes}; {fix}")
        for name in kwargs:
            if name in self.hints:
                continue
            if name in self.positional[:n]:
                return (f"tl.{self.op} got {name} twice (as positional argument "
                        f"{self.positional.index(name) + 1} and as {name}=); pass it once")
            if name not in self.positional and name not in self.keyword_only:
                return self._unknown(name)
        for name in self.positional[n:self.required]:
            if name not in kwargs:
                return f"tl.{self.op} needs {name}: {self.takes}; pass {name}=..."
        return None

    def _unknown(self, name: str) -> str:
        refusal = REFUSED.get(self.op, {}).get(name)
        if refusal is not None:
            return f"tl.{self.op}({name}=...) is not modelled: {refusal.reason}; {refusal.fix}"
        known = (*self.positional, *self.keyword_only, *self.hints)
        import difflib  # here: only a misspelt name pays for it (and heapq)

        close = difflib.get_close_matches(name, known, n=1)
        did_you_mean = f" (did you mean {close[0]}=?)" if close else ""
        return (f"tl.{self.op}({name}=...) is not modelled: {self.takes}; remove "
                f"{name}={did_you_mean}")


S = TypeVar("S", bound=_HasTracer)
P = ParamSpec("P")
R = TypeVar("R")


def tl_op(*hints: str) -> Callable[[Callable[Concatenate[S, P], R]],
                                   Callable[Concatenate[S, P], R]]:
    """Decorate a `Tl` method: refuse any call its documented parameters do not cover.

    `hints` are keywords accepted and dropped before the method runs.
    """

    def decorate(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        sig = OpSignature.of(fn.__name__, fn, tuple(hints))

        # whether a call is refused depends only on how many positional arguments it
        # has and which keywords: judged once per such call shape (this runs per op)
        fine: dict[object, bool] = {}

        @functools.wraps(fn)
        def checked(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            shape = (len(args), *kwargs) if kwargs else len(args)
            plain = fine.get(shape)
            if plain is None:
                problem = sig.problem(args, kwargs)
                if problem is not None:
                    raise self._t.refuse(
                        UnsupportedArgument(f"{self._t.where()}: error: {problem}"))
                plain = fine[shape] = not any(h in kwargs for h in sig.hints)
            if not plain:
                for hint in sig.hints:
                    kwargs.pop(hint, None)
            return fn(self, *args, **kwargs)

        checked.signature = sig  # type: ignore[attr-defined]
        return checked

    return decorate
