"""The code blocks of a Markdown document, read as a reader runs them, and the output each shows.

The markup (README.md follows it; docs/ sections opt in):

- a `````python`` block runs in one Python session shared by the document's python blocks, in
  order; the `````text`` block right after it (on the next line) is what it prints to stdout, and
  a python block without one must print nothing;
- a `````console`` block holds ``$ COMMAND`` lines, each followed by what the command prints
  (stdout and stderr, as a terminal shows them); a command must exit 0;
- any other block must be announced, on the line just before it, by
  ``<!-- not run: REASON -->``: the test lists those blocks, so none is skipped unnoticed.

In README.md every block follows these rules. In the other documents, the blocks from a line
``<!-- run: the blocks below, up to the next heading -->`` to the next heading do.

Run as a script (``python tests/doc_blocks.py BLOCKS.json RESULTS.json``, in the directory the
blocks run in), this module is the session: it runs the blocks and writes what each printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

RUN_SECTION = "<!-- run: the blocks below, up to the next heading -->"
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
_FENCE = re.compile(r"^```(.*)$")


class MarkupError(ValueError):
    """A block that breaks the markup (located: document and line)."""


@dataclass(frozen=True)
class Step:
    """One thing a reader runs: a python block, or one ``$`` command of a console block, with
    the output the document shows for it. ``line``: where it starts in the document."""

    document: str
    line: int
    kind: str  # "python" or "console"
    code: str
    expected: str

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


@dataclass(frozen=True)
class NotRun:
    document: str
    line: int
    reason: str


@dataclass(frozen=True)
class _Block:
    line: int  # the opening fence's line, 1-based
    end: int  # the closing fence's line
    language: str
    body: str
    marker: str | None  # the not-run reason on the line before


def _blocks(lines: list[str], document: str, start: int, stop: int) -> list[_Block]:
    blocks, i = [], start
    while i < stop:
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j >= len(lines):
            raise MarkupError(f"{document}:{i + 1}: a block that is never closed")
        marker = _NOT_RUN.search(lines[i - 1]) if i else None
        body = "".join(line + "\n" for line in lines[i + 1 : j])
        blocks.append(
            _Block(
                i + 1, j + 1, opening.group(1).strip(), body, marker.group(1) if marker else None
            )
        )
        i = j + 1
    return blocks


def _console_steps(block: _Block, document: str) -> list[Step]:
    steps: list[Step] = []
    command: str | None = None
    line, output = 0, []
    for k, text in enumerate(block.body.splitlines()):
        if text.startswith("$ "):
            if command is not None:
                steps.append(Step(document, line, "console", command, "".join(output)))
            command, line, output = text[2:], block.line + 1 + k, []
        elif command is None:
            raise MarkupError(f"{document}:{block.line + 1 + k}: output before any $ command")
        else:
            output.append(text + "\n")
    if command is None:
        raise MarkupError(f"{document}:{block.line}: a console block without a $ command")
    steps.append(Step(document, line, "console", command, "".join(output)))
    return steps


def _steps(blocks: list[_Block], document: str) -> tuple[list[Step], list[NotRun]]:
    steps: list[Step] = []
    not_run: list[NotRun] = []
    k = 0
    while k < len(blocks):
        block = blocks[k]
        after = blocks[k + 1] if k + 1 < len(blocks) else None
        k += 1
        if block.marker is not None:
            not_run.append(NotRun(document, block.line, block.marker))
        elif block.language == "python":
            shown = ""
            if after is not None and after.line == block.end + 1:
                if after.language != "text" or after.marker is not None:
                    raise MarkupError(
                        f"{document}:{after.line}: the block right after a python block must "
                        "be its output, a ```text block"
                    )
                shown, k = after.body, k + 1
            steps.append(Step(document, block.line, "python", block.body, shown))
        elif block.language == "console":
            steps += _console_steps(block, document)
        else:
            kind = f"a ```{block.language}" if block.language else "an unlabelled ```"
            raise MarkupError(
                f"{document}:{block.line}: {kind} block that is neither run (```python, or "
                "```console) nor the output right after a python block (```text), nor marked "
                "<!-- not run: why -->"
            )
    return steps, not_run


def read_document(text: str, document: str) -> tuple[list[Step], list[NotRun]]:
    """The steps of a whole document (README.md: every block), and its blocks marked not run."""
    lines = text.splitlines()
    return _steps(_blocks(lines, document, 0, len(lines)), document)


def read_sections(text: str, document: str) -> list[tuple[list[Step], list[NotRun]]]:
    """The steps of each section of a document that opts in with :data:`RUN_SECTION`, one
    list a section (each runs in a session of its own)."""
    lines = text.splitlines()
    headings, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            headings.append(i)
    sections = []
    for i, line in enumerate(lines):
        if line.strip() == RUN_SECTION:
            stop = next((h for h in headings if h > i), len(lines))
            sections.append(_steps(_blocks(lines, document, i + 1, stop), document))
    return sections


def normalize(output: str) -> str:
    """What the comparison ignores: spaces at the end of a line, and blank lines at the end."""
    return "\n".join(line.rstrip() for line in output.rstrip().splitlines())


# -- the session: run as a script in the directory the blocks run in ---------------------------


def _run_python(code: str, where: str, namespace: dict[str, object]) -> tuple[str, str | None]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), namespace)
    except BaseException:
        return out.getvalue(), traceback.format_exc()
    return out.getvalue(), None


def _run_console(command: str) -> tuple[str, str | None]:
    done = subprocess.run(
        command,
        shell=True,
        executable="/bin/bash",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    error = None if done.returncode == 0 else f"exit status {done.returncode}"
    return done.stdout, error


def run_session(steps: list[Step]) -> list[dict[str, object]]:
    """Run the steps in order here; what each printed and its error (None when it ran). Stops
    at the first step that fails: the ones after it would fail for its sake."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    results: list[dict[str, object]] = []
    for step in steps:
        if step.kind == "python":
            printed, error = _run_python(step.code, step.where, namespace)
        else:
            printed, error = _run_console(step.code)
        results.append({"printed": printed, "error": error})
        if error is not None:
            break
    return results


def _main(blocks_json: str, results_json: str) -> None:
    steps = [Step(**s) for s in json.loads(Path(blocks_json).read_text())]
    results = run_session(steps)
    sys.stdout.flush()
    Path(results_json).write_text(json.dumps(results))


def steps_json(steps: list[Step]) -> str:
    return json.dumps([asdict(s) for s in steps])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _main(sys.argv[1], sys.argv[2])
