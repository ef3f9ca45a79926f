"""README.md and docs/ (issue 10, item 10): every command marked runnable is run, with its
exit code and the lines it claims checked; the examples name files that exist.

A runnable block follows a `<!-- runnable -->` (or `<!-- runnable: DIR -->`) line: each
`$ meshproof ARGS   # exit N` line is a command (exit 0 unless said), the lines under it
what it prints, in order, `...` standing for text left out (whitespace is not compared:
tables wrap). Commands run in a copy of DIR (default: an empty directory).
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from meshproof.cli import main

DOCS = (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "ci.md")
EXAMPLES = REPO_ROOT / "docs" / "examples"
_MARK = re.compile(r"^<!-- runnable(?::\s*(\S+))? -->$")
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


@dataclass(frozen=True)
class Command:
    where: str          # file:line, for the failure message
    cwd: str            # relative to the repo root; "" = an empty directory
    args: tuple[str, ...]
    exit_code: int
    claims: tuple[str, ...]


def runnable_commands() -> list[Command]:
    commands: list[Command] = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            mark = _MARK.match(line)
            if not mark:
                continue
            assert lines[i + 1].startswith("```"), f"{doc.name}:{i + 1}: no block follows"
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            commands += _commands(doc, i + 2, lines[i + 2:end], mark.group(1) or "")
    return commands


def _commands(doc: Path, first: int, block: list[str], cwd: str) -> list[Command]:
    out: list[Command] = []
    current: list[str] = []
    start = 0
    for offset, line in enumerate([*block, "$ end"]):
        if not line.startswith("$ "):
            current.append(line)
            continue
        if current:
            head, *claims = current
            code = _EXIT.search(head)
            words = shlex.split(_EXIT.sub("", head)[2:], comments=True)
            assert words[0] == "meshproof", head
            out.append(Command(f"{doc.relative_to(REPO_ROOT)}:{first + start + 1}", cwd,
                               tuple(words[1:]), int(code.group(1)) if code else 0,
                               tuple(c for c in claims if c.strip() != "...")))
        current, start = [line], offset
    return out


COMMANDS = runnable_commands()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_docs_mark_their_commands_runnable() -> None:
    assert len(COMMANDS) >= 8
    assert {c.args[0] for c in COMMANDS} >= {"verify", "simulate", "gate"}


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_a_runnable_command_does_what_the_docs_say(
        command: Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    if command.cwd:
        shutil.copytree(REPO_ROOT / command.cwd, work)
    else:
        work.mkdir()
    (work / "tests").mkdir(exist_ok=True)  # README names test kernels by repo-relative paths
    if not (work / "tests" / "kernels").exists():
        (work / "tests" / "kernels").symlink_to(REPO_ROOT / "tests" / "kernels")
    monkeypatch.chdir(work)
    code = main(list(command.args))
    captured = capsys.readouterr()
    printed = _flat(captured.out + "\n" + captured.err)
    assert code == command.exit_code, f"{command.where}: exit {code}\n{printed}"
    position = 0
    for claim in command.claims:
        for piece in (p for p in (_flat(x) for x in claim.split("...")) if p):
            found = printed.find(piece, position)
            assert found >= 0, f"{command.where}: not printed (in this order): {piece!r}"
            position = found + len(piece)


def _fence(doc: Path, language: str, nth: int = 0) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", doc.read_text(encoding="utf-8"),
                        re.MULTILINE | re.DOTALL)
    return str(blocks[nth])


def test_ci_docs_show_the_example_files_as_they_are() -> None:
    ci = REPO_ROOT / "docs" / "ci.md"
    assert _fence(ci, "toml") == (EXAMPLES / "proofs.toml").read_text(encoding="utf-8")
    assert _fence(ci, "python") == "# test_attn.py\n" + \
        (EXAMPLES / "test_attn.py").read_text(encoding="utf-8")


def test_the_ci_docs_pytest_example_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    namespace: dict[str, object] = {}
    exec(compile((EXAMPLES / "test_attn.py").read_text(encoding="utf-8"),
                 str(EXAMPLES / "test_attn.py"), "exec"), namespace)
    tests = [f for name, f in sorted(namespace.items()) if name.startswith("test_")]
    assert len(tests) == 2
    for test in tests:
        test()  # type: ignore[operator]
    sys.modules.pop("kernels.attn", None)
    sys.modules.pop("kernels", None)


@pytest.mark.parametrize("doc", sorted({*DOCS, *(REPO_ROOT / "spec").glob("*.md")}),
                         ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_relative_links_lead_to_files(doc: Path) -> None:
    links = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8"))
    missing = [link for link in links if "://" not in link
               and not (doc.parent / link).exists()]
    assert missing == []
