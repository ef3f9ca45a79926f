"""A closed pipe (`meshproof verify ... | head -1`) does not change the exit code.

The reader went away; the verdict did not. click answers a broken pipe with exit 1 and rich
with `SystemExit(1)`, and 1 means "violated". Instead the command's standard streams are
wrapped for the run: the first write or flush that meets a closed pipe points the stream's
file descriptor at /dev/null, and the rest of the output is dropped silently, so the
command finishes and exits with its own code (0 proved, 1 violated, ...), as it would have
with a reader that read everything.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class _PipeSafe:
    """A text stream that drops what it is given once its reader has gone."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._closed(exc)
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except OSError as exc:
                self._closed(exc)

    def _closed(self, exc: OSError) -> None:
        if exc.errno not in (errno.EPIPE, errno.EINVAL):
            raise exc
        self.closed_pipe = True
        # What is still buffered goes nowhere, now and at interpreter exit.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def pipe_safe_streams() -> Iterator[None]:
    """Run the body with sys.stdout and sys.stderr wrapped (see the module docstring);
    what they still hold is flushed on the way out, under the same rule."""
    saved = sys.stdout, sys.stderr
    out, err = _PipeSafe(saved[0]), _PipeSafe(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved
