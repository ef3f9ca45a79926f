"""Find a kernel: a built-in name or `path/to/file.py::function`.

The model layer names no kernel: the built-in ones are found through the resolver that
`meshproof.kernels` registers (`register_builtins`), imported at the first look-up of a
name because the `meshproof` package declares it (model/builtin_source.py); everything
else is a kernel file (`resolve_kernel_file`).

Kernel files written for kernbench import `kernbench.common.pe_commands.TensorHandle`.
When kernbench is not installed we provide that module (meshproof's symbolic tensor) for
the duration of the import, so such files load unmodified.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshproof.errors import InternalError, KernelLoadError, TraceError
from meshproof.model import builtin_source
from meshproof.model.schedule import GroupMode, Scalar
from meshproof.model.tensor import TensorHandle
from meshproof.model.tracer import KernelFn, KernelSite


class TraceStopped(BaseException):
    """Raised into a running import or trace by its supervisor (model/isolation_child.py's
    signal handlers) when a limit expires. A BaseException, so that a kernel's `except
    Exception:` does not swallow it; `load_module` and `trace` turn it into `error` at the
    kernel line they were on."""

    def __init__(self, error: type[TraceError], reason: str) -> None:
        super().__init__(reason)
        self.error = error
        self.reason = reason


@dataclass(frozen=True, slots=True)
class KernelRef:
    """A resolved kernel: the function, where it lives, and built-in metadata if any."""

    name: str
    func: KernelFn = field(compare=False)
    site: KernelSite
    description: str = ""
    harness: str = "decode"
    defaults: tuple[tuple[str, Scalar], ...] = ()
    source_hash: str = ""
    default_wiring: str = "pe_line"
    default_mesh: str | None = None
    default_cubes: int = 1
    default_cube_start: int = 0     # the first cube of its natural launch (--cube-start)
    default_groups: GroupMode = GroupMode.LAUNCH   # which ranks form one attention problem
    default_mask: str | None = None     # the mask its natural launch declares (--mask)
    # what resolve_kernel was given (a built-in name or path::function), so that a fresh
    # process can find the kernel again (model/isolation.py); "" for a function object
    spec: str = ""


def display_path(path: Path) -> str:
    """The path diagnostics print, one the user can open from where they run meshproof:
    relative to the working directory if the file lies below it (a checkout's
    `meshproof/kernels/mesh_mlo.py`, a project's `kernels/attn.py`), else absolute (an
    installed meshproof's built-in kernels, in site-packages)."""
    real = path.resolve()
    with contextlib.suppress(ValueError, OSError):
        return real.relative_to(Path.cwd().resolve()).as_posix()
    return real.as_posix()


def site_of(func: KernelFn) -> KernelSite:
    # A decorated kernel (functools.wraps) is attributed to its own body, not the wrapper's.
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None:
        raise KernelLoadError(f"{func!r} is not a Python function; kernels are plain "
                              "`def k(..., *, tl)` functions")
    return KernelSite(code.co_filename, display_path(Path(code.co_filename)),
                      code.co_firstlineno)


def _hash_file(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


# A built-in kernel by its name, or None; registered by meshproof.kernels.
BuiltinResolver = Callable[[str], "KernelRef | None"]


def register_builtins(resolver: BuiltinResolver) -> None:
    """Let `resolve_kernel` find built-in kernels by name (meshproof.kernels calls this)."""
    builtin_source.register(resolver)


def builtin_ref(name: str, func: KernelFn, description: str, harness: str,
                defaults: dict[str, Scalar], wiring: str, mesh: str | None, cubes: int,
                groups: GroupMode, mask: str | None = None,
                cube_start: int = 0) -> KernelRef:
    """The KernelRef of a built-in kernel, for the resolver that names them."""
    site = site_of(func)
    return KernelRef(name, func, site, description, harness, tuple(sorted(defaults.items())),
                     _hash_file(site.real_file), wiring, mesh, cubes, cube_start, groups,
                     mask, name)


def resolve_kernel(spec: str) -> KernelRef:
    """A built-in kernel (through the registered resolver) or `resolve_kernel_file`."""
    builtin = builtin_source.resolver()
    ref = builtin(spec) if builtin is not None else None
    if ref is None:
        return resolve_kernel_file(spec)
    if not isinstance(ref, KernelRef):
        raise InternalError(f"the built-in kernel resolver answered {spec!r} with "
                            f"{type(ref).__name__}, not a KernelRef; please report")
    return ref


def resolve_kernel_file(spec: str) -> KernelRef:
    """`path/to/file.py::function`, imported (kernbench's TensorHandle provided)."""
    if "::" not in spec:
        if spec.endswith(".py") or os.sep in spec:
            raise KernelLoadError(f"kernel {spec!r} names a file but no function: write "
                                  f"{spec}::function_name")
        raise KernelLoadError(f"unknown kernel {spec!r}: use a built-in name (see `meshproof "
                              "list`) or path/to/file.py::function")
    path_text, _, func_name = spec.rpartition("::")
    if not func_name:
        raise KernelLoadError(f"kernel {spec!r} has an empty function name after '::'")
    path = Path(path_text)
    if path.is_dir():
        raise KernelLoadError(f"kernel file {path_text} is a directory; name a .py file")
    if not path.is_file():
        raise KernelLoadError(f"kernel file {path_text} does not exist")
    module = load_module(path)
    func = getattr(module, func_name, None)
    if func is None or not inspect.isfunction(func):
        candidates = sorted(n for n, v in vars(module).items()
                            if inspect.isfunction(v) and "tl" in inspect.signature(v).parameters)
        hint = f"; functions taking tl: {', '.join(candidates)}" if candidates else ""
        raise KernelLoadError(f"{path_text} has no function {func_name!r}{hint}")
    if "tl" not in inspect.signature(func).parameters:
        raise KernelLoadError(f"{path_text}::{func_name} takes no `tl` parameter; kernels are "
                              "`def k(..., *, tl)`")
    if inspect.isgeneratorfunction(func) or inspect.iscoroutinefunction(func) or \
            inspect.isasyncgenfunction(func):
        # Calling it would run no kernel code at all: an empty schedule, vacuously proved.
        raise KernelLoadError(f"{path_text}::{func_name} is a generator or async function; "
                              "kernels are plain `def k(..., *, tl)` functions (no yield, "
                              "no async)")
    harness = str(getattr(func, "meshproof_harness", "decode"))
    doc = (inspect.getdoc(func) or "").strip().splitlines()
    mask = getattr(func, "meshproof_mask", None)
    return KernelRef(spec, func, site_of(func), doc[0] if doc else "", harness, (),
                     _hash_file(str(path)), default_mask=None if mask is None else str(mask),
                     spec=spec)


@contextlib.contextmanager
def kernbench_shim() -> Iterator[None]:
    """Provide `kernbench.common.pe_commands` while importing, unless kernbench exists."""
    names = ("kernbench", "kernbench.common", "kernbench.common.pe_commands")
    if importlib.util.find_spec("kernbench") is not None:
        yield
        return
    saved = {n: sys.modules.get(n) for n in names}
    mods = [types.ModuleType(n) for n in names]
    mods[2].TensorHandle = TensorHandle  # type: ignore[attr-defined]
    mods[0].common = mods[1]  # type: ignore[attr-defined]
    mods[1].pe_commands = mods[2]  # type: ignore[attr-defined]
    for n, m in zip(names, mods, strict=True):
        sys.modules[n] = m
    try:
        yield
    finally:
        for n, old in saved.items():
            if old is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = old


def load_module(path: Path) -> Any:
    real = path.resolve()
    mod_name = "meshproof_user_" + hashlib.sha256(str(real).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(mod_name, real)
    if spec is None or spec.loader is None:
        raise KernelLoadError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    # Registered like a normal import: dataclasses (and typing) look the module up in
    # sys.modules while the file executes.
    sys.modules[mod_name] = module
    # As for a script, modules next to the kernel file are importable (a shared helper
    # file); appended, so they never shadow an installed package.
    if str(real.parent) not in sys.path:
        sys.path.append(str(real.parent))
    with kernbench_shim():
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            sys.modules.pop(mod_name, None)
            where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
            raise KernelLoadError(f"{where}: syntax error: {one_line(exc.msg)}") from None
        except KeyboardInterrupt:
            sys.modules.pop(mod_name, None)
            raise
        except TraceStopped as stop:  # a limit of the import's child process expired
            sys.modules.pop(mod_name, None)
            line = innermost_line(stop, str(real))
            where = f"{path}:{line}" if line else str(path)
            raise stop.error(f"{where}: error: {stop.reason}") from None
        except BaseException as exc:  # the module raised (or called sys.exit) while importing
            sys.modules.pop(mod_name, None)
            line = innermost_line(exc, str(real))
            raise KernelLoadError(f"{path}:{line}: importing the kernel file raised "
                                  f"{describe_exception(exc)}") from None
    return module


def describe_exception(exc: BaseException) -> str:
    """`TYPE: message` on one line, even for an exception whose str() fails or is empty."""
    try:
        text = one_line(str(exc))
    except Exception:  # a user exception class with a broken __str__
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(text: str) -> str:
    """A message folded onto one line: diagnostics are one line each."""
    return " ".join(text.split())


def innermost_line(exc: BaseException, filename: str) -> int:
    line = 0
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename and frame.lineno is not None:
            line = frame.lineno
    return line
