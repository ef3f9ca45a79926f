"""The Kahn-network run at the judged queue depth, which deadlock_freedom, its
background certificate, the re-check and the unwritten-output check all read: one
analysis (`ctx.shared(progress_at_depth)`, keyed by this function), in a leaf module so
that deadlock.py and certificate_job.py need not import each other."""

from __future__ import annotations

from meshproof.model.progress import Progress, run
from meshproof.verify.properties import CheckContext


def progress_at_depth(ctx: CheckContext) -> Progress:
    """The Kahn-network run at the judged queue depth (shared: `ctx.shared(...)`)."""
    return run(ctx.schedule, ctx.channels, ctx.depth)
