"""What the tests of parquet_bloom._format share: a table with every kind of column for pyarrow
to write, the footer of a file, footers changed on purpose, and the check that bad input fails
only as CorruptFileError."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquet_bloom import _format as fmt
from parquet_bloom.errors import CorruptFileError

ROWS = 300
ROWS_PER_GROUP = 100
BLOOM_COLUMNS = ("i64", "s", "st.b.c", "tags.list.element")


def rich_table() -> pa.Table:
    n = ROWS
    table = pa.table(
        {
            "i64": pa.array(range(n), pa.int64()),
            "s": pa.array([f"v{i}" for i in range(n)]),
            "st": pa.array([{"a": i, "b": {"c": str(i)}} for i in range(n)]),
            "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
            "m": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "d": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(10, 2)),
            "d38": pa.array([decimal.Decimal(i) for i in range(n)], pa.decimal128(38, 0)),
            "ts": pa.array(
                [datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "ts_ms": pa.array(range(n), pa.timestamp("ms")),
            "day": pa.array(range(n), pa.date32()),
            "f": pa.array([float(i) if i % 7 else float("nan") for i in range(n)]),
            "b": pa.array([i % 2 == 0 for i in range(n)]),
            "fixed": pa.array([i.to_bytes(4, "big") for i in range(n)], pa.binary(4)),
            "u8": pa.array([i % 256 for i in range(n)], pa.uint8()),
            "maybe": pa.array([None if i % 3 else i for i in range(n)], pa.int32()),
        }
    )
    # Key-value metadata that is not valid UTF-8: kept as bytes thanks to KeyValue: binary.
    return table.replace_schema_metadata({b"k\xff": b"\xfe\x00v", "plain": "text"})


def write(path: Path, table: pa.Table, **kwargs: Any) -> Path:
    pq.write_table(table, path, **kwargs)
    return path


def footer_of(path: Path) -> bytes:
    data = path.read_bytes()
    length = fmt.parse_footer_trailer(data[-fmt.FOOTER_TRAILER_SIZE :], file_size=len(data))
    return data[-fmt.FOOTER_TRAILER_SIZE - length : -fmt.FOOTER_TRAILER_SIZE]


def only_corrupt(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call fn; success and CorruptFileError are fine, any other exception fails the test."""
    try:
        return fn(*args, **kwargs)
    except CorruptFileError:
        return None


def mutated(footer: bytes, change: Any) -> bytes:
    """``footer`` decoded, changed by ``change(md)`` and encoded again."""
    md = fmt.decode_file_metadata(footer, full=True)
    change(md)
    return fmt.encode_file_metadata(md)
