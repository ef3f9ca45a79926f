"""Where resolve_kernel finds the built-in kernels (model/builtin_source.py): declared by
the meshproof package, imported at the first look-up, so `import meshproof` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from meshproof.errors import KernelLoadError
from meshproof.model.loader import resolve_kernel

# a fresh interpreter: this one has imported everything already
_CODE = """
import sys
import meshproof
light = not any(m in sys.modules for m in ("numpy", "meshproof.kernels"))
from meshproof.model.loader import resolve_kernel
print(light, resolve_kernel("mesh_mlo_2d").name, "meshproof.kernels" in sys.modules)
"""


def test_importing_meshproof_imports_no_kernel_and_the_first_look_up_finds_them() -> None:
    done = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "mesh_mlo_2d", "True"]


def test_a_name_no_declared_module_knows_is_an_unknown_kernel() -> None:
    with pytest.raises(KernelLoadError, match="unknown kernel 'no_such_kernel'"):
        resolve_kernel("no_such_kernel")
