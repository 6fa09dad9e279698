"""Every code block of the README and of the documentation site (``docs/*.md``) runs as written.

- A fenced ``python`` block runs as a script of its own, in a temporary directory (relative
  SQLite files land there), with ``DBMEMORY_URL`` on a temporary SQLite file and the user data
  directory moved there too; it must exit 0.
- A fenced ``console`` block is a shell session: its ``$ `` lines run in order in one bash, with
  ``dbmemory`` standing for ``python -m dbmemory`` of this checkout; the lines under a command
  are its output, compared line by line (whitespace runs, box-drawing rules, dates and times,
  and the transcript's ``/tmp/transcript`` folder normalised); a command whose output starts with
  ``Error:`` must exit non-zero (unless it echoes its own exit code), every other one 0.
- A fenced ``bash`` block with a line starting ``dbmemory `` runs as a bash script, line by line
  in order; every line must exit 0.
- The shell blocks start one CLI process per command (about two minutes in all on 2 cores): they
  are marked ``slow``, so CI runs them and a plain local run leaves them out
  (``DBMEMORY_TEST_SLOW=1`` or ``-m slow`` runs them).
- A block that cannot run here (a server, a model key) has ``<!-- snippet: skip (reason) -->``
  on the line above its fence: it is reported as skipped with that reason.
- A block with no language whose lines are ``dbmemory`` commands is a doc bug (it would escape
  this test): mark it ``console`` or ``bash``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP_MARK = re.compile(r"^<!-- snippet: skip \((?P<reason>.+)\) -->$")
SHELLS = {"bash", "sh", "shell", "console"}


@dataclass(frozen=True)
class Snippet:
    file: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.file.relative_to(ROOT).as_posix()}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """The fenced blocks of one markdown file, with the skip reason written above each."""
    found: list[Snippet] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = lines[start - 1] if start else ""
        mark = SKIP_MARK.match(above.strip())
        found.append(Snippet(path, start + 1, fence.group(1), "\n".join(lines[start + 1:end]) + "\n",
                             mark.group("reason") if mark else None))
        i = end + 1
    return found


ALL = [s for path in DOC_FILES for s in snippets(path)]
PYTHON = [s for s in ALL if s.lang == "python"]
SHELL = [s for s in ALL if s.lang == "console" or (
    s.lang in SHELLS and any(line.startswith("dbmemory ") for line in s.text.splitlines()))]


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "DBMEMORY_URL": f"sqlite:///{(tmp_path / 'snippet.db').as_posix()}",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PY": sys.executable,
    }


def _run_or_skip(snippet: Snippet) -> None:
    if snippet.skip:
        pytest.skip(f"{snippet.name}: {snippet.skip}")


@pytest.mark.parametrize("snippet", PYTHON, ids=[s.name for s in PYTHON])
def test_python_block_runs(snippet: Snippet, tmp_path: Path) -> None:
    _run_or_skip(snippet)
    script = tmp_path / "snippet.py"
    script.write_text(snippet.text, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{snippet.name} failed:\n{snippet.text}\n{done.stdout}\n{done.stderr}"


def _console_steps(text: str) -> list[tuple[str, list[str]]]:
    """``[(command, shown output lines)]`` of a ``console`` block."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def _bash_steps(text: str) -> list[tuple[str, list[str] | None]]:
    """``[(command, None)]`` of a ``bash`` block: each line not blank and not a comment."""
    return [(line, None) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?")


def _normal(lines: list[str], folder: str) -> list[str]:
    out = []
    for line in lines:
        line = line.replace("/tmp/transcript", folder)
        line = _DATE.sub("<date>", line)
        line = re.sub(r"─+", "─", line)
        line = " ".join(line.split())
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return [line for line in out if line]


@pytest.mark.slow  # about two minutes on 2 cores (one CLI process per command): CI runs it
@pytest.mark.parametrize("snippet", SHELL, ids=[s.name for s in SHELL])
def test_shell_block_runs_through_the_cli(snippet: Snippet, tmp_path: Path) -> None:
    _run_or_skip(snippet)
    steps = _console_steps(snippet.text) if snippet.lang == "console" else _bash_steps(snippet.text)
    assert steps, f"{snippet.name}: no command to run"
    outputs = tmp_path / ".snippet"
    outputs.mkdir()
    script = ['dbmemory() { "$PY" -m dbmemory "$@"; }']
    for n, (command, _shown) in enumerate(steps):
        script.append(f"{{ {command}\n}} >{outputs}/{n}.out 2>&1 </dev/null; echo $? >{outputs}/{n}.rc")
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for n, (command, shown) in enumerate(steps):
        out = (outputs / f"{n}.out").read_text(encoding="utf-8")
        rc = int((outputs / f"{n}.rc").read_text())
        expect_error = bool(shown) and shown[0].startswith("Error:") and "exit code $?" not in command
        assert (rc != 0) == expect_error, f"{snippet.name}: `{command}` exited {rc}:\n{out}"
        if shown:
            assert _normal(out.splitlines(), str(tmp_path)) == _normal(shown, str(tmp_path)), (
                f"{snippet.name}: `{command}` printed something else than the docs show:\n{out}")


def test_every_skip_mark_stands_right_above_a_block() -> None:
    stray = []
    for path in DOC_FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if SKIP_MARK.match(line.strip()) and not (n + 1 < len(lines) and lines[n + 1].startswith("```")):
                stray.append(f"{path.relative_to(ROOT)}:{n + 1}")
    assert stray == [], f"skip marks that mark no block: {stray}"


def test_no_command_transcript_escapes_the_runner() -> None:
    untyped = [s.name for s in ALL if s.lang == "" and any(
        re.match(r"^(\$ )?dbmemory ", line) for line in s.text.splitlines())]
    assert untyped == [], f"blocks of dbmemory commands without a language (use console or bash): {untyped}"


def test_the_runner_finds_the_readme_quickstart_and_the_transcripts() -> None:
    """The parser sees the blocks (a parser that found nothing would let every page rot)."""
    runnable = {s.name.split(":")[0] for s in PYTHON + SHELL if not s.skip}
    assert {"README.md", "docs/cli.md", "docs/items.md", "docs/langgraph.md", "docs/transactions.md"} <= runnable
    assert len([s for s in PYTHON + SHELL if not s.skip]) >= 10
