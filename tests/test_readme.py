"""The README runs as written: its blocks, run in order in a copy of the data ``make demo``
leaves in demo/ (as a reader runs them there), print exactly the output it shows.

tests/doc_blocks.py reads the blocks (the markup is described there) and is the session that
runs them, in a subprocess whose working directory is the copy, with this environment's bin
directory first on PATH (``parquet-bloom``). A docs/ section that opts in runs the same way,
in a session of its own. Compared: each step's output, with spaces at the end of lines and
blank lines at the end ignored; nothing else is normalised (the outputs hold no timing).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from examples.readme_data import write_example_data
from tests import doc_blocks
from tests.doc_blocks import MarkupError, NotRun, Step

ROOT = Path(__file__).resolve().parents[1]
# The blocks that do not run, each for its reason: keep this short.
NOT_RUN = [
    ("README.md", "it makes the environment and the data the other blocks run in"),
    ("README.md", "installs from PyPI"),
]
SESSION_TIMEOUT = 600  # seconds: a whole document, Spark's start included


@pytest.fixture(scope="session")
def example_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``make demo`` leaves in demo/, written once for the run."""
    directory = tmp_path_factory.mktemp("demo") / "demo"
    write_example_data(directory)
    return directory


def session_env(path: str | None = None) -> dict[str, str]:
    """The environment of a reader's shell: this Python's bin directory first on PATH (or
    ``path`` as given), and no Spark settings made by the test run itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    if path is None:
        path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PATH"] = path
    return env


def run_steps(
    steps: list[Step], data: Path, tmp_path: Path, env: dict[str, str] | None = None
) -> list[str]:
    """Run ``steps`` in one session in a fresh copy of ``data``; the mismatches (empty when
    every step ran and printed what its document shows)."""
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    where = run / "session"
    shutil.copytree(data, where)
    blocks, results = run / "steps.json", run / "results.json"
    blocks.write_text(doc_blocks.steps_json(steps))
    done = subprocess.run(
        [sys.executable, str(Path(doc_blocks.__file__)), str(blocks), str(results)],
        cwd=where,
        env=session_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
    )
    if done.returncode != 0 or not results.exists():
        return [f"the session failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"]
    return compare(steps, json.loads(results.read_text()))


def compare(steps: list[Step], results: list[dict[str, object]]) -> list[str]:
    problems = []
    for step, result in zip(steps, results, strict=False):  # a session stops at a failure
        printed = str(result["printed"])
        if result["error"] is not None:
            problems.append(f"{step.where}: {step.code.strip()}\n{printed}{result['error']}")
        elif doc_blocks.normalize(printed) != doc_blocks.normalize(step.expected):
            diff = difflib.unified_diff(
                doc_blocks.normalize(step.expected).splitlines(),
                doc_blocks.normalize(printed).splitlines(),
                "shown",
                "printed",
                lineterm="",
            )
            problems.append(f"{step.where}: the output differs\n" + "\n".join(diff))
    if len(results) < len(steps) and not problems:
        problems.append(f"{steps[len(results)].where}: not run")
    return problems


def readme() -> tuple[list[Step], list[NotRun]]:
    return doc_blocks.read_document((ROOT / "README.md").read_text(), "README.md")


def doc_sections() -> list[tuple[str, list[Step]]]:
    """The docs/ sections that opt in, each named by its document and first step's line."""
    sections = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        name = path.relative_to(ROOT).as_posix()
        for steps, _ in doc_blocks.read_sections(path.read_text(), name):
            if steps:
                sections.append((steps[0].where, steps))
    return sections


def _marks(steps: list[Step]) -> list[pytest.MarkDecorator]:
    return [pytest.mark.spark] if any("pyspark" in s.code for s in steps) else []


def test_readme_prints_what_it_shows(example_data: Path, tmp_path: Path) -> None:
    steps, _ = readme()
    problems = run_steps(steps, example_data, tmp_path)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize(
    "steps", [pytest.param(s, id=w, marks=_marks(s)) for w, s in doc_sections()]
)
def test_doc_example_prints_what_it_shows(
    steps: list[Step], example_data: Path, tmp_path: Path
) -> None:
    """Run as a reader runs them; PySpark's without this environment's bin directory on PATH
    (as from ``.venv/bin/python`` not activated), where ``python3`` is another Python: the
    example must name its workers' Python itself."""
    env = None
    if _marks(steps):
        here = str(Path(sys.executable).parent)
        path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != here)
        assert shutil.which("python3", path=path) != str(Path(here) / "python3")
        env = session_env(path)
    problems = run_steps(steps, example_data, tmp_path, env)
    assert not problems, "\n\n".join(problems)


def test_blocks_not_run_are_these() -> None:
    not_run = [n for n in readme()[1]]
    for path in sorted((ROOT / "docs").glob("*.md")):
        for _, marked in doc_blocks.read_sections(path.read_text(), path.name):
            not_run += marked
    assert [(n.document, n.reason) for n in not_run] == NOT_RUN


def test_readme_and_doc_examples_have_steps() -> None:
    steps, _ = readme()
    assert sum(s.kind == "python" for s in steps) >= 5
    assert any(s.kind == "console" for s in steps)
    assert {w.split(":")[0] for w, _ in doc_sections()} >= {
        "docs/object-storage.md",
        "docs/spark.md",
    }


# -- the checker itself -----------------------------------------------------------------------

DOCUMENT = """# t

```python
x = 6 * 7
print(x)
```
```text
{shown}
```

```python
y = x + 1
```

```console
$ echo {echo}
hello
```
"""


@pytest.mark.parametrize(
    ("shown", "echo", "wrong"),
    [("42", "hello", None), ("43", "hello", "t.md:3"), ("42", "hullo", "t.md:16")],
)
def test_a_wrong_output_is_found(
    shown: str, echo: str, wrong: str | None, example_data: Path, tmp_path: Path
) -> None:
    steps, not_run = doc_blocks.read_document(DOCUMENT.format(shown=shown, echo=echo), "t.md")
    assert [s.kind for s in steps] == ["python", "python", "console"] and not not_run
    problems = run_steps(steps, example_data, tmp_path)
    if wrong is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(f"{wrong}: the output differs")


def test_the_readme_with_a_wrong_output_fails(example_data: Path, tmp_path: Path) -> None:
    """The README's first python block, its shown output changed by one character."""
    steps, _ = readme()
    first = next(s for s in steps if s.kind == "python")
    altered = Step(first.document, first.line, first.kind, first.code, first.expected + "!")
    assert run_steps([altered], example_data, tmp_path)[0].startswith(
        f"{first.where}: the output differs"
    )


def test_output_that_should_not_be_printed_fails(example_data: Path, tmp_path: Path) -> None:
    steps, _ = doc_blocks.read_document("```python\nprint('surprise')\n```\n", "t.md")
    assert run_steps(steps, example_data, tmp_path) == [
        "t.md:1: the output differs\n--- shown\n+++ printed\n@@ -0,0 +1 @@\n+surprise"
    ]


def test_a_failing_step_is_reported_and_ends_the_session(
    example_data: Path, tmp_path: Path
) -> None:
    text = "```python\nraise KeyError('k')\n```\n\n```console\n$ false\n```\n"
    steps, _ = doc_blocks.read_document(text, "t.md")
    problems = run_steps(steps, example_data, tmp_path)
    assert len(problems) == 1 and "KeyError: 'k'" in problems[0]
    steps, _ = doc_blocks.read_document("```console\n$ exit 3\n```\n", "t.md")
    assert run_steps(steps, example_data, tmp_path)[0].endswith("exit status 3")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```\nmake\n```\n", "t.md:1: an unlabelled ``` block that is neither run"),
        ("```sh\nls\n```\n", "t.md:1: a ```sh block that is neither run"),
        ("```python title\nx=1\n```\n", "t.md:1: a ```python title block that is neither"),
        ("```text\n1\n```\n", "t.md:1: a ```text block that is neither run"),
        ("```python\nx=1\n```\n```console\n$ ls\n```\n", "t.md:4: the block right after"),
        ("```console\nls\n```\n", "t.md:2: output before any $ command"),
        ("```python\nx=1\n", "t.md:1: a block that is never closed"),
    ],
)
def test_markup_errors_are_located(text: str, message: str) -> None:
    with pytest.raises(MarkupError, match="^" + message.replace("$", r"\$")):
        doc_blocks.read_document(text, "t.md")


def test_a_block_marked_not_run_is_listed() -> None:
    steps, not_run = doc_blocks.read_document(
        "<!-- not run: needs a real cloud account -->\n```sh\naws s3 ls\n```\n", "t.md"
    )
    assert steps == [] and not_run == [NotRun("t.md", 2, "needs a real cloud account")]


def test_a_section_runs_up_to_the_next_heading() -> None:
    text = (
        "```sh\nnot checked\n```\n## A\n"
        f"{doc_blocks.RUN_SECTION}\n```python\n# a comment\nprint(1)\n```\n```text\n1\n```\n"
        "## B\n```sh\nnot checked\n```\n"
    )
    ((steps, not_run),) = doc_blocks.read_sections(text, "d.md")
    assert [(s.line, s.code, s.expected) for s in steps] == [(6, "# a comment\nprint(1)\n", "1\n")]
    assert not_run == []
