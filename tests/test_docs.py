"""README.md, docs/, spec/ and tests/README.md (issue 10, item 10; issue 21): every command
marked runnable is run, with its exit code and the lines it claims checked; the examples
name files that exist; every line number and exit code a doc states is checked.

A runnable block follows a `<!-- runnable -->` (or `<!-- runnable: DIR -->`) line: each
`$ meshproof ARGS   # exit N` line is a command (exit 0 unless said), the lines under it
what it prints, in order, `...` standing for text left out (whitespace is not compared:
tables wrap). Commands run in a copy of DIR (default: an empty directory, beside a link to
the study's `shared/` as `../shared`).

A line number stated anywhere else (`mesh_mlo.py:53`, "line 57") must be one that a
runnable command prints, so it is checked by running; an illustration uses a file that
does not exist (`k.py:509`) or `LINE`. An exit code stated anywhere else, --help texts
included, is one of `ExitCode`'s and stands beside the words for what it means.
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

DOCS = (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "ci.md",
        *sorted((REPO_ROOT / "spec").glob("*.md")), REPO_ROOT / "tests" / "README.md")
EXAMPLES = REPO_ROOT / "docs" / "examples"
SHARED = REPO_ROOT.parent / "shared"
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
        if current and current[-1].endswith("\\"):  # a command continued on this line
            current[-1] = current[-1][:-1] + " " + line.strip()
            continue
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


def test_runnable_commands_need_nothing_outside_the_clone() -> None:
    """Runnable examples run from a clone at any path (issue 28, item 6): no command reads
    a file beside the checkout (the study's ../shared/ is an illustration, not runnable)."""
    outside = [f"{c.where}: {a}" for c in COMMANDS for a in c.args
               if a.startswith("../") or "/../" in a or a.startswith("/")]
    assert outside == []


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
    if any("../shared/" in a for a in command.args):
        if not SHARED.is_dir():
            pytest.skip(f"{command.where} reads the study's shared/, absent beside the checkout")
        (tmp_path / "shared").symlink_to(SHARED)
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


# --- line numbers and exit codes stated outside runnable blocks --------------------------

_FILE_LINE = re.compile(r"([\w./-]*\w\.(?:py|toml)):(\d+)\b")
_PROSE_LINE = re.compile(r"\blines? (\d+)\b")
_EXIT_WORDS = re.compile(r"\b(?:exits?|exit code|exits with)\s+(\d+)\b")
# What each exit code means, in the words the docs use beside it (meshproof.exitcodes).
MEANINGS: dict[int, tuple[str, ...]] = {
    0: ("proved", "ok", "met", "never exits 0", "exit 0 /"),
    1: ("violated", "not as expected", "out of tolerance", "did not", "not ok", "refused",
        "error row", "deadlock", "failed"),
    2: ("bad input", "one line", "error (", "error)", "error,", "error:", "invalid", "rejects",
        "refuses"),
    3: ("unknown",),
    70: ("internal error",),
    130: ("interrupt", "ctrl-c"),
    143: ("terminat", "sigterm"),
}


def _outside_runnable(doc: Path) -> list[tuple[int, str]]:
    """(line number, text) of the doc's lines that are not in a runnable block."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    kept: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        if _MARK.match(lines[i]):
            i = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```")) + 1
            continue
        kept.append((i + 1, lines[i]))
        i += 1
    return kept


def _exists(ref: str, doc: Path) -> bool:
    ref = ref.lstrip("./")
    roots = (REPO_ROOT, EXAMPLES, doc.parent, SHARED / "seeds", REPO_ROOT / "tests")
    if any((root / ref).is_file() for root in roots):
        return True
    name = Path(ref).name
    return any(p.name == name and p.as_posix().endswith(ref)
               for root in (REPO_ROOT / "meshproof", REPO_ROOT / "tests", EXAMPLES)
               for p in root.rglob(name))


def _claimed_text() -> str:
    return _flat(" ".join(" ".join((" ".join(c.args), *c.claims)) for c in COMMANDS))


@pytest.mark.parametrize("doc", [d for d in DOCS if d.is_file()],
                         ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_stated_line_number_is_one_a_runnable_command_prints(doc: Path) -> None:
    claimed = _claimed_text()
    unchecked: list[str] = []
    for number, line in _outside_runnable(doc):
        for ref, n in _FILE_LINE.findall(line):
            if _exists(ref, doc) and f"{Path(ref).name}:{n}" not in claimed:
                unchecked.append(f"{doc.name}:{number}: {ref}:{n}")
        for n in _PROSE_LINE.findall(line):
            if not re.search(rf"\bline {n}\b", claimed):
                unchecked.append(f"{doc.name}:{number}: line {n}")
    assert unchecked == [], "stated lines no runnable command checks (run one that " \
        "prints them, or write an illustration as k.py:LINE)"


def _help_texts() -> list[tuple[str, str]]:
    from meshproof.cli import COMMANDS as NAMES

    texts = []
    for name in NAMES:
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            main([name, "--help"])
        texts.append((f"meshproof {name} --help", _flat(buffer.getvalue())))
    return texts


def _misstated_exits(where: str, text: str) -> list[str]:
    from meshproof.exitcodes import ExitCode

    wrong = []
    for match in _EXIT_WORDS.finditer(text):
        code = int(match.group(1))
        around = text[max(0, match.start() - 240):match.end() + 80].lower()
        if code not in {int(c) for c in ExitCode}:
            wrong.append(f"{where}: exit {code} is not an ExitCode")
        elif not any(word in around for word in MEANINGS[code]) and not \
                (code == 2 and re.search(r"[a-z]error\b", around)):  # LaunchError, exit 2
            quote = text[max(0, match.start() - 60):match.end() + 20]
            wrong.append(f"{where}: exit {code} without what it means "
                         f"({' / '.join(MEANINGS[code])}): …{quote}…")
    return wrong


def test_every_stated_exit_code_means_what_it_says() -> None:
    wrong: list[str] = []
    for doc in (d for d in DOCS if d.is_file()):
        text = "\n".join(line for _, line in _outside_runnable(doc))
        wrong += _misstated_exits(doc.name, _flat(text))
    for where, text in _help_texts():
        wrong += _misstated_exits(where, text)
    assert wrong == []


def test_the_gate_help_states_the_trace_limit_exit_the_gate_gives() -> None:
    # `gate --help` said --trace-timeout gives exit 2; the gate makes it an error row and
    # exits 1 (tests/test_gate.py runs it).
    text = dict(_help_texts())["meshproof gate --help"]
    assert "the case is an error row naming the kernel's line (never cached) and the gate " \
        "exits 1" in text


def test_the_readme_shows_the_example_kernel_as_it_is() -> None:
    example = REPO_ROOT / "examples" / "line_merge.py"
    assert _fence(REPO_ROOT / "README.md", "python") == example.read_text(encoding="utf-8")
    lines = [line for line in example.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) <= 40  # about 30 lines a user can copy
