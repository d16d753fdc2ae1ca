"""Encrypted files against the same files in plaintext: probing their filters, rewriting them.

Builds one table of 100 int64 columns x 100 row groups of 1,000 rows (10,000 column chunks)
and writes it three times with pyarrow: in plaintext; encrypted with one key for the footer and
every column (``uniform``, encrypted footer); and with 10 column keys over half the columns and a
plaintext footer (``columns``), both through pyarrow's CryptoFactory and the tests' in-memory
KMS (double wrapping). pyarrow writes no filters into encrypted files, so each gets its filters
(every column, fpp 1 %) from ``rewrite_bloom_filters``, the encrypted ones with their keys: the
files then differ only in their encryption. Timed, best of several runs taken in turns:

- probing: ``BloomFilterReader(path, decryption=keys)`` and ``row_groups_might_contain`` of one
  value on each of the 100 columns (every filter of the file read: a plaintext filter by its
  header and the blocks the value needs, an encrypted one whole, as GCM decrypts a module
  whole), against the plaintext file;
- the rewrite: ``rewrite_bloom_filters(columns=all, decryption=keys)`` of each encrypted file
  (its pages decrypted to hash, its new filters and footer encrypted), against the plaintext
  rewrite.

pyarrow cannot be the peer for reading the filters: it has no Python API for them.

Targets (issue 31): probing encrypted <= 1.3x plaintext; encrypted rewrite <= 1.2x plaintext.
Then the same, shown without targets, on chunks 100 times as large (10 columns x 10 row
groups of 100,000 rows): the cost per chunk against the cost per byte.
Run: ``.venv/bin/python benchmarks/bench_encryption.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
from timing import best_in_turns, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' KMS client

import parquet_bloom as pb
from tests.encryption.keys import InServerWrapKms

PROBE_TARGET = 1.3
REWRITE_TARGET = 1.2
MASTER_KEYS = {"kf": b"0123456789012345", **{f"k{i}": bytes([65 + i]) * 16 for i in range(10)}}


def build_table(columns: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table({f"c{i:03d}": rng.integers(0, 1 << 40, rows) for i in range(columns)})


def write(table: pa.Table, path: Path, rows_per_group: int, mode: str) -> None:
    if mode == "plaintext":
        pq.write_table(table, path, row_group_size=rows_per_group)
        return
    kms = InServerWrapKms(MASTER_KEYS)
    factory = pe.CryptoFactory(lambda config: kms)
    if mode == "uniform":
        config = pe.EncryptionConfiguration(footer_key="kf", uniform_encryption=True)
    else:
        names = table.column_names[: len(table.column_names) // 2]
        count = min(10, len(names))
        keys = {f"k{i}": names[i::count] for i in range(count)}
        config = pe.EncryptionConfiguration(footer_key="kf", column_keys=keys)
        config.plaintext_footer = True
    props = factory.file_encryption_properties(pe.KmsConnectionConfig(), config)
    pq.write_table(table, path, row_group_size=rows_per_group, encryption_properties=props)


def keys_for(mode: str) -> pb.DecryptionKeys | None:
    if mode == "plaintext":
        return None
    return pb.DecryptionKeys.from_kms(InServerWrapKms(MASTER_KEYS))


def run(columns: int, row_groups: int, rows_per_group: int, repeat: int, targets: bool) -> bool:
    """One configuration, timed; whether its targets (if ``targets``) are met."""
    modes = ("plaintext", "uniform", "columns")
    ok = True
    chunks = columns * row_groups
    print(f"== {columns} columns x {row_groups} row groups of {rows_per_group:,} rows")
    with tempfile.TemporaryDirectory() as tmp:
        table = build_table(columns, row_groups * rows_per_group)
        names = table.column_names
        probe_values = {name: int(table.column(name)[7].as_py()) for name in names}
        filtered: dict[str, Path] = {}
        for mode in modes:
            raw = Path(tmp) / f"{mode}.raw.parquet"
            write(table, raw, rows_per_group, mode)
            filtered[mode] = Path(tmp) / f"{mode}.parquet"
            pb.rewrite_bloom_filters(
                raw, filtered[mode], columns=names, fpp=0.01, decryption=keys_for(mode)
            )
            print(f"{mode}: {filtered[mode].stat().st_size:,} bytes with filters")

        def probe(mode: str) -> Any:
            def go() -> None:
                with pb.BloomFilterReader(filtered[mode], decryption=keys_for(mode)) as reader:
                    for name, value in probe_values.items():
                        assert 0 in reader.row_groups_might_contain(name, [value])

            return go

        def rewrite(mode: str) -> Any:
            out = Path(tmp) / f"{mode}.out.parquet"

            def go() -> None:
                pb.rewrite_bloom_filters(
                    filtered[mode], out, columns=names, fpp=0.01, decryption=keys_for(mode)
                )

            return go

        probes = best_in_turns({m: probe(m) for m in modes}, repeat)
        rewrites = best_in_turns({m: rewrite(m) for m in modes}, repeat)
        for what, times, target in (
            (f"probe {columns} columns ({chunks:,} filters)", probes, PROBE_TARGET),
            (f"rewrite {columns} columns ({chunks:,} filters)", rewrites, REWRITE_TARGET),
        ):
            print(f"{what}: plaintext {times['plaintext']:.3f} s")
            ratio = times["uniform"] / times["plaintext"]
            if targets:
                ok &= report(f"{what}, uniform", ratio, f"<= {target}", ratio <= target)
            else:
                report(f"{what}, uniform", ratio)
            columns_ratio = times["columns"] / times["plaintext"]
            report(f"{what}, half the columns, plaintext footer", columns_ratio)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--columns", type=int, default=100)
    parser.add_argument("--row-groups", type=int, default=100)
    parser.add_argument("--rows-per-group", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ok = run(args.columns, args.row_groups, args.rows_per_group, args.repeat, targets=True)
    # The same bytes in chunks 100x larger: what is per chunk, against what is per byte.
    run(args.columns // 10, args.row_groups // 10, args.rows_per_group * 100, args.repeat, False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
