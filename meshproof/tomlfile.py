"""Reading the TOML files users pass (wiring, hardware profile, proof matrix, launches):
one rule for a missing file, a directory, bad TOML and an unreadable file, each one line
naming what the file is for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from meshproof.errors import BadInput, ConfigError


def read_toml(path: Path, what: str, missing: str, *, directory: str = "pass a TOML file",
              error: type[BadInput] = ConfigError) -> dict[str, Any]:
    """The top-level table of the TOML file `path`, else `error`: "`what` PATH does not
    exist; `missing`", "... is a directory; `directory`", "... is not valid TOML: ..." or
    "... cannot be read: ..."."""
    if path.is_dir():
        raise error(f"{what} {path} is a directory; {directory}")
    if not path.is_file():
        raise error(f"{what} {path} does not exist; {missing}")
    import tomllib  # here: compiling its regexes costs every start-up that reads no file

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise error(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
