"""Checking the live files of a table's snapshot: :func:`parquet_bloom.check_file` on each, and
one verdict for the table (shared by :mod:`parquet_bloom.delta` and :mod:`parquet_bloom.iceberg`).

The table modules list the files (a Delta snapshot's add actions, an Iceberg snapshot's
manifests), never the directory, so files a rewrite replaced and not yet vacuumed are not read.
Each file is checked with the same options; the run fails when a file has a violation, or when
no filter was checked in any file (an ``"empty"`` violation of the table) unless
``allow_empty`` (:mod:`parquet_bloom._gate`). A file without a named column (it was written
before the column was added) is checked without it, and says so in its notes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from parquet_bloom._audit import CheckReport, Violation, check_file
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._gate import EMPTY_KIND, empty_message
from parquet_bloom._reader import BloomFilterReader

__all__ = [
    "DEFAULT_MAX_WORKERS",
    "TableCheckReport",
    "TableFile",
    "check_table_columns",
    "check_table_files",
]

# Files checked at once: a check reads a file's filters and hashes its chunks' values (numpy,
# which releases the GIL in its sorts), so a few at once overlap one's reads with another's work.
DEFAULT_MAX_WORKERS = 4


@dataclass(frozen=True)
class TableFile:
    """A live data file: ``key`` as the table's metadata names it, ``source`` where it is read
    (a local path or a URL)."""

    key: str
    source: str


@dataclass(frozen=True)
class TableCheckReport:
    """The check of a table's live files: each file's :class:`~parquet_bloom.CheckReport` (in
    the snapshot's order), and the table's own ``violations`` (``"empty"``: no filter checked
    in any file). ``version``: the Delta version or Iceberg snapshot id checked (None for a
    table without a snapshot). ``ok`` when neither the table nor a file has a violation."""

    table: str
    format: str
    version: int | None
    files: tuple[CheckReport, ...]
    violations: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.violations and all(f.ok for f in self.files)

    @property
    def filters_checked(self) -> int:
        return sum(len(f.chunks) for f in self.files)

    @property
    def all_violations(self) -> list[Violation]:
        """The table's violations, then every file's."""
        return [*self.violations, *(v for f in self.files for v in f.violations)]

    def __str__(self) -> str:
        which = "version" if self.format == "delta" else "snapshot"
        lines = [
            f"{self.table} ({self.format} {which} {self.version}): {len(self.files)} live "
            f"files, {self.filters_checked} filters checked"
        ]
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.extend(f"  VIOLATION [{v.kind}] {v}" for v in self.all_violations)
        failed = len(self.all_violations)
        lines.append("OK: no violations" if self.ok else f"FAILED: {failed} violations")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON: each file's :meth:`~parquet_bloom.CheckReport.to_dict`."""
        return {
            "table": self.table,
            "format": self.format,
            "version": self.version,
            "filters_checked": self.filters_checked,
            "files": [f.to_dict() for f in self.files],
            "violations": CheckReport(self.table, (), self.violations).to_dict()["violations"],
            "notes": list(self.notes),
            "ok": self.ok,
        }


def check_table_columns(
    names: Iterable[str] | str | None, columns: Sequence[str], where: str
) -> None:
    """Raise one ValueError for the first of ``names`` (dotted Parquet paths, or ``"all"``
    / ``"existing"``, which name no column) whose top-level column is not among ``columns``
    (the table schema's), naming the columns there are: before any file is touched."""
    if names is None or isinstance(names, str):
        return
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"columns must be dotted path strings, not {type(name).__name__}")
        if name not in columns and name.split(".", 1)[0] not in columns:
            raise ValueError(
                f"no column {name!r} in {where}; its columns are "
                f"{', '.join(repr(c) for c in columns)}"
            )


def check_table_files(
    table: str,
    table_format: str,
    version: int | None,
    files: Sequence[TableFile],
    *,
    columns: Iterable[str] | None,
    require: Iterable[str] | None,
    max_fpp: float | None,
    allow_empty: bool,
    storage_options: Mapping[str, Any] | None,
    by_field_id: bool = False,
    max_workers: int = DEFAULT_MAX_WORKERS,
    progress: Callable[[CheckReport], None] | None = None,
    decryption: DecryptionKeys | None = None,
) -> TableCheckReport:
    """Check each of ``files`` as :func:`~parquet_bloom.check_file` does, ``max_workers`` at
    once (encrypted files read with ``decryption``); the table fails when no filter was checked
    at all, unless ``allow_empty``.

    ``columns`` and ``require`` are Parquet column paths, or with ``by_field_id`` Parquet field
    ids (as text), found in each file by its schema's field ids (Iceberg: a renamed column
    keeps its id, and its old name in old files)."""
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, not {max_workers!r}")
    wanted = None if columns is None else [columns] if isinstance(columns, str) else list(columns)
    required = None if require is None else [require] if isinstance(require, str) else list(require)

    def one(f: TableFile) -> CheckReport:
        return _check_one(f, wanted, required, max_fpp, storage_options, by_field_id, decryption)

    reports = []
    with ThreadPoolExecutor(max_workers, thread_name_prefix="table-check") as pool:
        for report in pool.map(one, files):
            reports.append(report)
            if progress is not None:
                progress(report)
    violations = []
    checked = sum(len(r.chunks) for r in reports)
    if not checked and not allow_empty and not any(r.violations for r in reports):
        n = len(reports)
        what = f"the table's {n} live file{'s' if n != 1 else ''}" if n else "the table (no file)"
        message = empty_message(what, "pass allow_empty=True")
        violations.append(Violation(EMPTY_KIND, table, None, None, None, message))
    return TableCheckReport(table, table_format, version, tuple(reports), tuple(violations))


def _check_one(
    f: TableFile,
    columns: list[str] | None,
    require: list[str] | None,
    max_fpp: float | None,
    storage_options: Mapping[str, Any] | None,
    by_field_id: bool,
    decryption: DecryptionKeys | None = None,
) -> CheckReport:
    options = storage_options if "://" in f.source else None
    if not by_field_id:
        try:
            return check_file(
                f.source,
                columns,
                max_fpp,
                storage_options=options,
                require=require,
                allow_empty=True,
                decryption=decryption,
            )
        except ValueError as err:
            if not str(err).startswith("no column"):
                raise
    # A file written before a column was added lacks it: checked for the columns it has.
    with BloomFilterReader(f.source, storage_options=options, decryption=decryption) as reader:
        leaves = reader.schema_leaves
    paths = [leaf.path for leaf in leaves]

    def present(names: list[str] | None) -> tuple[list[str] | None, list[str]]:
        if names is None:
            return None, []
        if by_field_id:
            found = {n: [x.path for x in leaves if str(x.field_id) == n] for n in names}
        else:
            found = {n: [p for p in paths if p == n or p.startswith(n + ".")] for n in names}
        have = [p for n in names for p in found[n]]
        return have, [("field id " if by_field_id else "") + n for n in names if not found[n]]

    kept_columns, lacked = present(columns)
    kept_require, lacked_required = present(require)
    if kept_columns == [] and not kept_require:
        report = CheckReport(f.source, (), (), ("no Bloom filters in the columns checked",))
    else:
        report = check_file(
            f.source,
            kept_columns,
            max_fpp,
            storage_options=options,
            require=kept_require,
            allow_empty=True,
            decryption=decryption,
        )
    missing = sorted(set(lacked) | set(lacked_required))
    if not missing:
        return report
    note = f"the file has no column {', '.join(missing)} (written before it was added)"
    return CheckReport(
        report.path,
        report.chunks,
        report.violations,
        (*report.notes, note),
        requests=report.requests,
        bytes_read=report.bytes_read,
        size=report.size,
    )
