"""The gate on a Dask cluster: local:1 against local:2, and the bytes against each other.

    .venv/bin/python benchmarks/cluster_gate.py            # proofs.toml + the placements
    .venv/bin/python benchmarks/cluster_gate.py --quick    # the placements only

The matrix: proofs.toml's cases plus one case per placement of mesh_mlo_2d at 2x4 (every
cube_start `meshproof placements` lists, expecting what it found for its four placement
properties: a placement that also breaks a semantic property fails its case, alike in both
runs, so the gate exits 1). Each run is a whole
`meshproof gate FILE --cluster local:N --no-cache` process writing JSON, JUnit and SARIF.
Prints the seconds of each, the speed-up (near 2 on 2 idle cores; less on a shared
machine) and whether the three files are the same bytes (JUnit's time attributes aside:
they are measured seconds). Prints figures; asserts nothing about time. Needs the
`cluster` extra.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MESHPROOF = str(Path(sys.executable).with_name("meshproof"))


def placement_cases() -> str:
    out = subprocess.run([MESHPROOF, "placements", "mesh_mlo_2d", "--mesh", "2x4", "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    cases = []
    for p in json.loads(out.stdout)["placements"]:
        expect = json.dumps(p["violated"]) if p["violated"] else '"proved"'
        cases.append(f'[[case]]\nname = "placement-2x4-at-{p["cube_start"]}"\n'
                     f'kernel = "mesh_mlo_2d"\nwiring = "cube_mesh"\nmesh = "2x4"\n'
                     f'cube_start = {p["cube_start"]}\nexpect = {expect}\n')
    return "\n".join(cases)


def gate(matrix: Path, cluster: str, out: Path) -> tuple[float, int, dict[str, bytes]]:
    files = {k: out / f"gate-{cluster.replace(':', '')}.{k}" for k in ("json", "xml", "sarif")}
    start = time.perf_counter()
    with files["json"].open("w") as fh:
        code = subprocess.run([MESHPROOF, "gate", str(matrix), "--cluster", cluster,
                               "--no-cache", "--json", "--junit", str(files["xml"]),
                               "--sarif", str(files["sarif"])], stdout=fh,
                              stderr=subprocess.DEVNULL, cwd=ROOT, check=False).returncode
    seconds = time.perf_counter() - start
    data = {k: p.read_bytes() for k, p in files.items()}
    data["xml"] = re.sub(rb'time="[0-9.]+"', b'time=""', data["xml"])
    return seconds, code, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the placements only")
    args = parser.parse_args()
    text = placement_cases()
    if not args.quick:
        text = (ROOT / "proofs.toml").read_text() + "\n" + text
    # beside proofs.toml: its kernel and wiring paths are relative to the matrix file
    with tempfile.NamedTemporaryFile("w", suffix=".toml", dir=ROOT, delete=False) as fh:
        fh.write(text)
    matrix = Path(fh.name)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            n = text.count("[[case]]")
            print(f"{n} cases ({'placements only' if args.quick else 'proofs.toml + placements'})")
            one = gate(matrix, "local:1", Path(tmp))
            print(f"local:1  {one[0]:8.1f} s  exit {one[1]}", flush=True)
            two = gate(matrix, "local:2", Path(tmp))
            print(f"local:2  {two[0]:8.1f} s  exit {two[1]}", flush=True)
            same = {k: one[2][k] == two[2][k] for k in one[2]}
            print(f"speed-up {one[0] / two[0]:.2f}x; same bytes: "
                  + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items())
                  + f"; same exit code: {'yes' if one[1] == two[1] else 'NO'}")
    finally:
        matrix.unlink()


if __name__ == "__main__":
    main()
