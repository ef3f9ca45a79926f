"""Hardware cost profile: the numbers the timing model and the default queue depth use.

The defaults are assumptions, stated as such in spec/timing.md; they are not measured
hardware. Users pass their own with `--hw FILE.toml`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

from meshproof.errors import ConfigError
from meshproof.tomlfile import read_toml


@dataclass(frozen=True, slots=True)
class LinkCost:
    """Latency and bandwidth of one class of link (assumed numbers, not measured)."""

    latency_s: float
    bandwidth_Bps: float


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """The timing model's assumed machine: compute, DMA and link rates, the IPCQ depth."""

    name: str = "default (assumed, not measured)"
    gemm_flops_per_pe: float = 8.0e12
    vector_elems_per_s: float = 2.0e11
    dma_bandwidth_Bps: float = 2.0e11
    dma_latency_s: float = 5.0e-7
    op_overhead_s: float = 5.0e-8
    intra_cube: LinkCost = LinkCost(1.0e-7, 1.0e11)
    inter_cube: LinkCost = LinkCost(5.0e-7, 5.0e10)
    inter_sip: LinkCost = LinkCost(2.0e-6, 2.5e10)
    ipcq_depth: int = 4

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = ({"latency_s": value.latency_s, "bandwidth_Bps": value.bandwidth_Bps}
                           if isinstance(value, LinkCost) else value)
        return out


DEFAULT_PROFILE = HardwareProfile()

_SCALARS = {"gemm_flops_per_pe", "vector_elems_per_s", "dma_bandwidth_Bps", "dma_latency_s",
            "op_overhead_s"}
_LINKS = {"intra_cube", "inter_cube", "inter_sip"}


def load_profile(path: Path) -> HardwareProfile:
    """Read a profile TOML; keys absent from the file keep the default's value."""
    data = read_toml(path, "hardware profile", "pass an existing TOML file or leave out --hw "
                     "for the default profile", directory="pass a TOML file, or leave out "
                     "--hw for the default profile")
    allowed = _SCALARS | _LINKS | {"name", "ipcq_depth"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"hardware profile {path}: unknown key(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join(sorted(allowed))}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise ConfigError(f"hardware profile {path}: name must be a one-line string, "
                          f"got {name!r}")
    kwargs: dict[str, object] = {"name": name}
    for key in sorted(_SCALARS & set(data)):
        kwargs[key] = _positive(data[key], f"{path}: {key}")
    for key in sorted(_LINKS & set(data)):
        table = data[key]
        if not isinstance(table, dict) or set(table) - {"latency_s", "bandwidth_Bps"}:
            raise ConfigError(f"hardware profile {path}: [{key}] takes latency_s and "
                              "bandwidth_Bps")
        base: LinkCost = getattr(DEFAULT_PROFILE, key)
        kwargs[key] = LinkCost(
            _positive(table.get("latency_s", base.latency_s), f"{path}: {key}.latency_s", 0.0),
            _positive(table.get("bandwidth_Bps", base.bandwidth_Bps),
                      f"{path}: {key}.bandwidth_Bps"))
    if "ipcq_depth" in data:
        depth = data["ipcq_depth"]
        if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= 1 << 16:
            raise ConfigError(f"hardware profile {path}: ipcq_depth must be an int in 0..65536")
        kwargs["ipcq_depth"] = depth
    return HardwareProfile(**kwargs)  # type: ignore[arg-type]


def _positive(value: object, where: str, minimum: float = 1e-30) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < minimum:
        raise ConfigError(f"hardware profile {where} must be a positive number "
                          f"(not nan or inf), got {value!r}")
    return float(value)
