"""The semantic analysis the three semantic properties share, once per verify run.

attention_equivalence, exactly_once_merge and numeric_safety read one analysis of the
schedule (verify/semantics/); `ctx.shared(shared_semantics)` computes it the first time a
property asks, within the run's `--timeout` and `--input-bound`, and caches it. It lives
here, beside the properties, so that the semantic engine imports nothing of verify/.
"""

from __future__ import annotations

from meshproof.verify.properties import CheckContext
from meshproof.verify.semantics import SemanticAnalysis, semantic_analysis
from meshproof.verify.semantics.budget import Budget


def shared_semantics(ctx: CheckContext) -> SemanticAnalysis:
    """The analysis the three semantic properties share (ctx.shared caches it)."""
    return semantic_analysis(ctx.schedule, ctx.channels, Budget.start(ctx.config.timeout_s),
                             ctx.config.input_bound, ctx.config.score_bound,
                             ctx.report if ctx.config.progress is not None else None)
