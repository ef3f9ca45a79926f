"""meshproof: a protocol verifier and reference simulator for mesh SPMD kernels."""

__version__ = "0.1.0"
