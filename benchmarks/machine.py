"""The machine a benchmark ran on, as the JSON it writes records it."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

import numpy as np


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine() -> dict[str, object]:
    return {"cpu": _cpu_model(), "cpus": os.cpu_count(), "memory_gib": _memory_gib(),
            "os": platform.platform(), "python": sys.version.split()[0],
            "numpy": np.__version__,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")}
