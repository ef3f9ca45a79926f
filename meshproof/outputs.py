"""Every file meshproof writes: one rule for output paths, one atomic writer.

The rule, checked before any work is done (`check_writable`): the path is not a
directory, and the nearest existing ancestor of its directory is a writable directory;
missing directories below it are created when the file is written. A path that breaks
the rule is bad input (`OutputError`, exit 2, one line) before a long verify or gate run,
not a write error at its end.

Writes are atomic (`write_bytes`, `write_text`): a temporary file in the target's
directory, then a rename over the target, so a reader (CI, a browser, a second run)
never sees half a file. `tempfile.mkstemp` creates the file private (0600); outputs are
for reading, so the file gets the permissions a plain `open(path, "w")` would give
(0666 & ~umask).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from meshproof import interrupts
from meshproof.errors import OutputError


def check_writable(path: Path, flag: str, *, what: str = "",
                   suffixes: tuple[str, ...] = ()) -> None:
    """Raise OutputError unless `path` can be written under the rule above.

    `flag` names the option the path came from (`--junit`), `what` what is written there
    (`the JUnit report `), `suffixes` the file types allowed (empty: any).
    """
    target = f"{what}{path}"
    if suffixes and path.suffix.lower() not in suffixes:
        raise OutputError(f"{flag} path {path} must end in {_either(suffixes)}")
    if path.is_dir():
        raise OutputError(f"cannot write {target}: it is a directory; pass a file path to "
                          f"{flag}")
    parent = path.absolute().parent
    existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if existing is None:
        return
    if not existing.is_dir():
        raise OutputError(f"cannot write {target}: {existing} is a file, not a directory; "
                          f"pass another {flag} path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {target}: {existing} is not writable; pass another "
                          f"{flag} path")


def _either(suffixes: tuple[str, ...]) -> str:
    return ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 \
        else suffixes[0]


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, creating missing parent directories; nothing
    once Ctrl-C or SIGTERM arrived (meshproof.interrupts)."""
    interrupts.check()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace_atomically(path, data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}; pass a path in a "
                          "writable directory") from None


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _replace_atomically(path: Path, data: bytes) -> None:
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
