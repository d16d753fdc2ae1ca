"""Older ClickHouse servers for the tests: each in its own Python environment holding an older
chDB release from PyPI, made on first use under ``.cache/chdb-<version>/`` in the project (kept
across runs, ignored by git), which runs ``older_writer.py`` to write MergeTree tables and answer
ClickHouse's own granule decisions. Without PyPI the environment cannot be made and the tests
that need it skip, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.clickhouse.conftest import SMALL_COLUMNS, SMALL_SELECT, TYPED_COLUMNS, TYPED_SELECT

PROJECT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PARQUET_BLOOM_TEST_CACHE", PROJECT / ".cache"))
WRITER = Path(__file__).with_name("older_writer.py")
# chDB release -> the ClickHouse it embeds. 2.1.1 is the last chDB on 24.8; 0.15.0 the one on
# 23.6 (bloom_filter granules record rows, not distinct hashes, before 23.9). Both have wheels
# for CPython 3.11 on manylinux and no dependencies.
OLDER = {"2.1.1": "24.8", "0.15.0": "23.6"}
INSTALL_TIMEOUT = 1200
READY = ".ready"

# name: (columns, select, settings, inserts (start, count), merge). Settings both servers know;
# compress_marks defaults to 1 there, so marks are .cmrk2 (wide) and .cmrk3 (compact) unless
# turned off.
OLDER_TABLES: dict[str, tuple[str, str, str, list[tuple[int, int]], bool]] = {
    "typed_wide": (  # .cmrk2, adaptive granularity, two parts
        TYPED_COLUMNS,
        TYPED_SELECT,
        "index_granularity=32, min_bytes_for_wide_part=0",
        [(0, 300), (300, 200)],
        False,
    ),
    "typed_compact": (  # .mrk3
        TYPED_COLUMNS,
        TYPED_SELECT,
        "index_granularity=32, min_bytes_for_wide_part=1000000000, compress_marks=0",
        [(0, 250)],
        False,
    ),
    "compact_merged": (  # .cmrk3, a merged part beside the parts it replaced
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=1000000000, old_parts_lifetime=3600",
        [(0, 100), (100, 100)],
        True,
    ),
    "fixed_granularity": (  # .mrk
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, index_granularity_bytes=0, min_bytes_for_wide_part=0, "
        "compress_marks=0",
        [(0, 100)],
        False,
    ),
    "wide_merged": (  # .mrk2, merged
        SMALL_COLUMNS,
        SMALL_SELECT,
        "index_granularity=16, min_bytes_for_wide_part=0, compress_marks=0, "
        "old_parts_lifetime=3600",
        [(0, 150), (150, 90)],
        True,
    ),
}


class Unavailable(Exception):
    """The environment could not be made (no network to PyPI, no wheel): the reason."""


def environment(version: str) -> tuple[Path, float | None]:
    """The Python of the environment holding chDB ``version``, made when missing, and the
    seconds making it took (None when it was there already)."""
    home = CACHE / f"chdb-{version}"
    python = home / "bin" / "python"
    if (home / READY).is_file():
        return python, None
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"chdb-{version}-", dir=CACHE))
    try:
        # The environment's Python is this one's base; pip is this environment's, pointed at
        # it. Made aside and renamed into place, so that a broken install is never taken for a
        # ready one (only its bin/python is run, which finds its packages wherever it lies).
        _run([sys.executable, "-m", "venv", "--without-pip", str(work)], "making the venv")
        _run(
            [
                sys.executable, "-m", "pip", "--python", str(work / "bin" / "python"),
                "install", "--quiet", "--only-binary", ":all:", f"chdb=={version}",
            ],
            f"installing chdb=={version} from PyPI",
        )  # fmt: skip
        (work / READY).write_text(f"chdb=={version}\n")
        # Another run may have made it meanwhile: keep that one.
        if not (home / READY).is_file():
            if home.exists():
                shutil.rmtree(home)
            work.rename(home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return python, time.monotonic() - started


def _run(cmd: list[str], what: str) -> None:
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.CalledProcessError as err:
        tail = (err.stderr or err.stdout or "").strip().splitlines()[-3:]
        raise Unavailable(f"{what} failed: {' / '.join(tail)}") from err
    except subprocess.TimeoutExpired as err:
        raise Unavailable(f"{what} took over {INSTALL_TIMEOUT} s") from err


def write_tables(python: Path, root: Path, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Has the old server write ``OLDER_TABLES`` under ``root`` and answer ``cases``."""
    request = {
        "root": str(root),
        "tables": [
            {
                "name": name,
                "columns": columns,
                "select": select,
                "settings": settings,
                "inserts": inserts,
                "merge": merge,
            }
            for name, (columns, select, settings, inserts, merge) in OLDER_TABLES.items()
        ],
        "cases": cases,
    }
    req, res = root / "request.json", root / "result.json"
    req.write_text(json.dumps(request))
    done = subprocess.run(
        [str(python), str(WRITER), str(req), str(res)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        cwd=root,
    )
    if done.returncode:
        raise RuntimeError(f"older_writer.py failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(res.read_text())
    return result
