"""The gate's result cache: unchanged cases are not re-proved.

The key is a sha256 over everything a verdict depends on:
- the meshproof version *and a digest of meshproof's own sources*, so a development
  checkout (where the version string does not move) never serves a stale verdict;
- the kernel's source file hash;
- the traced schedule IR (JSON) and the wiring's links — tracing is cheap, and the IR
  captures edits to helper modules the kernel imports that a source hash would miss;
- what is run: queue depth (in the IR's launch), simulate on/off.
Expectations and case names are not in the key: flipping an expectation or renaming a
case re-checks the cached outcome instead of re-proving it.

Only decided outcomes are stored; an unknown (a timeout depends on machine load) is
always re-run. Entries are one JSON file each, written atomically.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from meshproof import __version__
from meshproof.errors import OutputError
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.model.serialize import schedule_to_json
from meshproof.outputs import check_writable_dir, write_text
from meshproof.verify.properties import VerifyConfig

CACHE_SCHEMA = "meshproof/gate-cache-v1"
CACHE_ENV = "MESHPROOF_CACHE_DIR"
CACHE_FLAG = "--cache-dir"


def cache_root(option: Path | None = None) -> Path:
    """Where meshproof keeps its cache: `--cache-dir`, else `$MESHPROOF_CACHE_DIR`, else
    `$XDG_CACHE_HOME/meshproof`, else `~/.cache/meshproof` — never inside the checkout
    unless asked, so running a project's gate leaves its working tree clean."""
    if option is not None:
        if option.exists() and not option.is_dir():
            raise OutputError(f"{CACHE_FLAG} {option} is a file, not a directory; pass a "
                              "directory (or --no-cache)")
        return option
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "meshproof"


@functools.cache
def meshproof_digest() -> str:
    """The version plus a hash of every .py file of the installed meshproof package."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def case_key(kernel: KernelRef, launch: Launch, schedule: Schedule, *, simulate: bool,
             config: VerifyConfig) -> str:
    links = [[lk.src.cube, lk.src.pe, lk.dir.value, lk.dst.cube, lk.dst.pe]
             for lk in launch.wiring.links]
    material = {
        "meshproof": meshproof_digest(),
        "kernel_source": kernel.source_hash,
        "schedule": schedule_to_json(schedule),
        "wiring_links": links,
        "simulate": simulate,
        # what changes a decided verdict: the assumption numeric_safety rests on, the
        # depth and the properties checked (budgets only ever make a verdict unknown,
        # which is never stored)
        "input_bound": config.input_bound,
        "score_bound": config.score_bound,
        "tolerance": config.tolerance,
        "queue_depth": config.queue_depth,
        "properties": [p.value for p in config.selected()],
    }
    if config.recheck is not None:   # a re-checked verdict is another verdict
        material["recheck"] = config.recheck.value
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class GateCache:
    """A directory of `<key>.json` entries (by default `~/.cache/meshproof/gate/`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(kernel: KernelRef, launch: Launch, schedule: Schedule, *, simulate: bool,
            config: VerifyConfig) -> str:
        return case_key(kernel, launch, schedule, simulate=simulate, config=config)

    def unwritable(self) -> str:
        """Why entries cannot be written here (one line), or "" when they can: the rule
        of every output directory (meshproof/outputs.py)."""
        try:
            check_writable_dir(self.directory, CACHE_FLAG, what="the gate cache ")
        except OutputError as exc:
            return str(exc)
        return ""

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.directory / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # a missing or half-written entry is a miss, never an error
        if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA or \
                data.get("key") != key:
            return None
        payload = data.get("outcome")
        return payload if isinstance(payload, dict) else None

    def put(self, key: str, outcome: dict[str, Any]) -> None:
        text = json.dumps({"schema": CACHE_SCHEMA, "key": key, "outcome": outcome},
                          sort_keys=True, indent=1, allow_nan=False)
        # checked up front (`unwritable`); a write that fails all the same (a full disk)
        # costs the cache entry, never the gate's verdict
        with contextlib.suppress(OutputError):
            write_text(self.directory / f"{key}.json", text)
