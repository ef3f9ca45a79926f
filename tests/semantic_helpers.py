"""Shared helpers of the semantic-property tests: run verify on a kernel."""

from __future__ import annotations

from pathlib import Path

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import PropertyResult, Verdict

KERNELS = Path(__file__).parent / "kernels"
CASES = f"{KERNELS / 'semantic_cases.py'}"
TREES = f"{KERNELS / 'merge_trees.py'}::merge_tree"
ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seeds" / "attention_mesh_mlo.py"


def run(kernel: str, **opts: object) -> Verdict:
    ref = resolve_kernel(kernel)
    args = tuple(sorted(opts.pop("args", {}).items()))  # type: ignore[attr-defined]
    numeric = {k: opts.pop(k) for k in ("input_bound", "score_bound", "tolerance") if k in opts}
    launch = build_launch(ref, LaunchOptions(args=args, **opts))  # type: ignore[arg-type]
    return verify(trace(ref, launch), VerifyConfig(queue_depth=launch.spec.queue_depth,
                                                   **numeric))  # type: ignore[arg-type]


def text_of(p: PropertyResult) -> str:
    cex = p.counterexample
    return p.message + "\n" + "\n".join(d.format() for d in (cex.diagnostics if cex else ()))
