"""meshproof: a protocol verifier and reference simulator for mesh SPMD kernels."""

from meshproof.model.builtin_source import declare as _declare

__version__ = "0.1.0"

# The built-in kernels register their resolver with model/loader.py (the model layer names
# no kernel itself) when a kernel is first looked up by name: importing them here would
# make every `import meshproof` (and `meshproof --help`) pay for numpy and the tracer.
_declare("meshproof.kernels")
