"""Every file meshproof writes: one rule for output paths, one atomic writer.

The rule, checked before any work is done (`check_writable`): the path is not a
directory, and the nearest existing ancestor of its directory is a writable directory;
missing directories below it are created when the file is written. A directory that is
written as a whole (`report --out`, `check_writable_dir`) follows the same rule, and must be
writable itself when it exists. A path that breaks the rule is bad input (`OutputError`,
exit 2, one line) before a long verify or gate run, not a write error at its end. A
symbolic link is followed: its target is written (or replaced), the link stays as it was.

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
    path = followed(path)
    if path.is_dir():
        raise OutputError(f"cannot write {target}: it is a directory; pass a file path to "
                          f"{flag}")
    _check_ancestor(path, target, flag)


def check_writable_dir(path: Path, flag: str, *, what: str = "") -> Path:
    """Raise OutputError unless the directory `path` can be written as a whole: it is a
    writable directory, or it does not exist yet and the rule above holds for it. Returns
    the directory to write (a symbolic link's target)."""
    target = f"{what}{path}"
    real = followed(path)
    if real.exists() and not real.is_dir():
        raise OutputError(f"cannot write {target}: it is a file, not a directory; pass a "
                          f"directory path to {flag}")
    if real.is_dir() and not writable_dir(real):
        raise OutputError(f"cannot write {target}: it is not writable; pass another {flag} "
                          "directory")
    _check_ancestor(real, target, flag)
    return real


def followed(path: Path) -> Path:
    """`path`, or the file a symbolic link at `path` leads to (which may not exist yet)."""
    return path.resolve() if path.is_symlink() else path


def _check_ancestor(path: Path, target: str, flag: str) -> None:
    parent = path.absolute().parent
    existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if existing is None:
        return
    if not existing.is_dir():
        raise OutputError(f"cannot write {target}: {existing} is a file, not a directory; "
                          f"pass another {flag} path")
    if not writable_dir(existing):
        raise OutputError(f"cannot write {target}: {existing} is not writable; pass another "
                          f"{flag} path")


def writable_dir(directory: Path) -> bool:
    """The directory may be written: this user may, and it is not read-only (a directory
    without write bits, such as a 555 one, is read-only even to root, who could)."""
    mode = directory.stat().st_mode
    return os.access(directory, os.W_OK | os.X_OK) and bool(mode & 0o222)


def _either(suffixes: tuple[str, ...]) -> str:
    return ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 \
        else suffixes[0]


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, creating missing parent directories; nothing
    once Ctrl-C or SIGTERM arrived (meshproof.interrupts)."""
    interrupts.check()
    path = followed(path)
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
