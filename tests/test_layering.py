"""The pipeline runs one way: model/ below kernels/, verify/ and sim/, which sit side by
side below deploy/, gate/, report/ and cli/ (spec/README.md, DESIGN §1). Checked on the
import statements. The model layer names no kernel: built-ins are found through the
resolver meshproof.kernels registers (model/loader.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "meshproof"
# what each layer must not import (its peers and everything above it)
FORBIDDEN = {
    "model": ("meshproof.kernels", "meshproof.verify", "meshproof.sim", "meshproof.deploy",
              "meshproof.gate", "meshproof.report", "meshproof.cli", "meshproof.panels",
              "meshproof.testing"),
    # the built-in kernels: tl programs and their table, above model/ only
    "kernels": ("meshproof.verify", "meshproof.sim", "meshproof.deploy", "meshproof.gate",
                "meshproof.report", "meshproof.cli", "meshproof.panels", "meshproof.testing"),
    "verify": ("meshproof.sim", "meshproof.gate", "meshproof.report", "meshproof.cli",
               "meshproof.panels", "meshproof.testing"),
    "sim": ("meshproof.verify", "meshproof.gate", "meshproof.report", "meshproof.cli",
            "meshproof.panels", "meshproof.testing"),
    "gate": ("meshproof.report", "meshproof.cli", "meshproof.testing"),
    # several launches at once, placements: above verify/ and sim/, below gate/
    "deploy": ("meshproof.gate", "meshproof.report", "meshproof.cli", "meshproof.testing"),
    "report": ("meshproof.cli", "meshproof.testing"),
}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    bad = [f"{path.relative_to(REPO_ROOT)} imports {name}"
           for path in sorted((PACKAGE / layer).rglob("*.py")) for name in _imports(path)
           if name.startswith(FORBIDDEN[layer])]
    assert bad == []


def test_deploy_verifies_without_the_simulator_and_simulates_without_the_verifier() -> None:
    """deploy/verify.py and deploy/simulate.py keep the back-ends apart, as gate/ does."""
    verify_side = _imports(PACKAGE / "deploy" / "verify.py")
    sim_side = _imports(PACKAGE / "deploy" / "simulate.py")
    assert not [n for n in verify_side if n.startswith("meshproof.sim")]
    assert not [n for n in sim_side if n.startswith(("meshproof.verify.api",
                                                     "meshproof.verify.registry"))]


def test_the_model_layer_finds_built_ins_through_the_kernels_resolver() -> None:
    from meshproof.kernels import resolve_builtin, resolve_kernel
    from meshproof.model import loader

    assert loader.resolve_kernel is resolve_kernel
    assert resolve_builtin("mesh_mlo_1d") == resolve_kernel("mesh_mlo_1d")
    assert resolve_builtin("tests/kernels/probes.py::x") is None

