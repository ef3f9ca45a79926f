"""The names of the properties meshproof proves: a leaf module, so that results
(verify/result.py) and the property interface (verify/properties.py) both name them
without importing each other."""

from __future__ import annotations

from enum import Enum


class Property(Enum):
    """The properties meshproof proves, in the order a verdict lists them."""

    DIRECTION_LEGALITY = "direction_legality"
    LAUNCH_CONFINEMENT = "launch_confinement"
    CHANNEL_MATCHING = "channel_matching"
    DEADLOCK_FREEDOM = "deadlock_freedom"
    EXACTLY_ONCE_MERGE = "exactly_once_merge"
    ATTENTION_EQUIVALENCE = "attention_equivalence"
    NUMERIC_SAFETY = "numeric_safety"
