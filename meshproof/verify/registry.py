"""Which function checks which property, in verdict order (`verify/api.py` iterates it)."""

from __future__ import annotations

from meshproof.verify.attention import attention_equivalence
from meshproof.verify.deadlock import deadlock_freedom
from meshproof.verify.exactly_once import exactly_once_merge
from meshproof.verify.legality import direction_legality, launch_confinement
from meshproof.verify.matching import channel_matching
from meshproof.verify.numeric_safety import numeric_safety
from meshproof.verify.properties import Check, Property

CHECKS: dict[Property, Check] = {
    Property.DIRECTION_LEGALITY: direction_legality,
    Property.LAUNCH_CONFINEMENT: launch_confinement,
    Property.CHANNEL_MATCHING: channel_matching,
    Property.DEADLOCK_FREEDOM: deadlock_freedom,
    Property.EXACTLY_ONCE_MERGE: exactly_once_merge,
    Property.ATTENTION_EQUIVALENCE: attention_equivalence,
    Property.NUMERIC_SAFETY: numeric_safety,
}
