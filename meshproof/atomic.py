"""Atomic file output: a reader (CI, a browser, a second run) never sees half a file.

Every output meshproof writes (reports, diagrams, traces, JUnit, cache entries) goes
through `write_atomic`: a temporary file in the target's directory, then a rename over
the target. `tempfile.mkstemp` creates the file private (0600); outputs are for reading,
so the file gets the permissions a plain `open(path, "w")` would give (0666 & ~umask).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically. Raises OSError; callers word the message."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # os.umask can only be read by setting it; put it straight back
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
