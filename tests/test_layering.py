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
    # schedule synthesis: above model/ and sim/, beside deploy/, below cli/; its kernels
    # are proved by verify through the CLI, never by the synthesiser itself
    "synth": ("meshproof.verify", "meshproof.deploy", "meshproof.gate", "meshproof.report",
              "meshproof.cli", "meshproof.testing"),
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



SEMANTICS = PACKAGE / "verify" / "semantics"


def _semantic_imports() -> dict[str, set[str]]:
    """semantics/ module -> the semantics/ modules it imports (at any depth of the file)."""
    prefix = "meshproof.verify.semantics."
    out: dict[str, set[str]] = {}
    for path in sorted(SEMANTICS.glob("*.py")):
        names = {n[len(prefix):].split(".")[0] for n in _imports(path) if n.startswith(prefix)}
        out[path.stem] = names - {path.stem}
    return out


def test_the_semantic_engine_imports_nothing_of_verify_outside_it() -> None:
    """verify/semantics/ is the engine the properties read; it never reads them (the
    shared analysis lives in verify/shared_analysis.py)."""
    bad = [f"{path.name} imports {name}" for path in sorted(SEMANTICS.glob("*.py"))
           for name in _imports(path)
           if name.startswith("meshproof.verify") and
           not name.startswith("meshproof.verify.semantics")]
    assert bad == []


def test_the_semantic_engine_has_no_import_cycle() -> None:
    """Each module of verify/semantics/ imports only modules before it in some order (the
    reading order of its __init__)."""
    graph = {m: deps for m, deps in _semantic_imports().items() if m != "__init__"}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(m: str, path: tuple[str, ...]) -> None:
        if state.get(m) == 2:
            return
        assert state.get(m) != 1, " -> ".join((*path, m))
        state[m] = 1
        for dep in sorted(graph.get(m, ())):
            if dep != "__init__":
                visit(dep, (*path, m))
        state[m] = 2
        order.append(m)

    for m in sorted(graph):
        visit(m, ())
    assert len(order) == len(graph)
