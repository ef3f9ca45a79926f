"""meshproof: a protocol verifier and reference simulator for mesh SPMD kernels."""

__version__ = "0.1.0"

# The built-in kernels register their resolver with model/loader.py (the model layer names
# no kernel itself).
import meshproof.kernels  # noqa: F401
