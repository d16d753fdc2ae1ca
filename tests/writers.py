"""Parquet files with Bloom filters, written by the real writers inside the test run."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from parquet_bloom._sbbf import SplitBlockBloomFilter

ROWS = 6_000
ROW_GROUP_SIZE = 2_000


def sample_table(rows: int = ROWS, seed: int = 0) -> pa.Table:
    """Columns of many Arrow types, with nulls, repeats and a nested struct and list."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-(2**40), 2**40, rows)
    small = rng.integers(-100, 100, rows)
    valid = rng.random(rows) > 0.05
    base = dt.datetime(2024, 1, 1)

    def masked(arr: pa.Array) -> pa.Array:
        return pc.if_else(pa.array(valid), arr, pa.nulls(len(arr), arr.type))

    strings = [f"user-{v:x}" for v in ints]
    return pa.table(
        {
            "int8": pa.array(small, pa.int8()),
            "int16": pa.array(small * 300, pa.int16()),
            "int32": masked(pa.array(ints % 2**31, pa.int32())),
            "int64": masked(pa.array(ints, pa.int64())),
            "uint8": pa.array(small + 100, pa.uint8()),
            "uint16": pa.array((small + 100) * 300, pa.uint16()),
            "uint32": pa.array(ints % 2**32, pa.uint32()),
            "uint64": pa.array((ints % 2**40) * 2**23, pa.uint64()),
            "float32": pa.array(ints / 7, pa.float32()),
            "float64": masked(pa.array(ints / 3, pa.float64())),
            "float16": pa.array((small / 4).astype(np.float16), pa.float16()),
            "decimal_9": pa.array(
                [decimal.Decimal(int(v % 10**7)).scaleb(-2) for v in ints], pa.decimal128(9, 2)
            ),
            "decimal_18": pa.array(
                [decimal.Decimal(int(v)).scaleb(-3) for v in ints], pa.decimal128(18, 3)
            ),
            "decimal_30": pa.array(
                [decimal.Decimal(int(v) * 10**9).scaleb(-5) for v in ints], pa.decimal128(30, 5)
            ),
            "date": pa.array(
                [(base + dt.timedelta(days=int(v % 5000))).date() for v in ints], pa.date32()
            ),
            "time_ms": pa.array(ints % 86_400_000, pa.int32()).cast(pa.time32("ms")),
            "time_us": pa.array(ints % 86_400_000_000, pa.int64()).cast(pa.time64("us")),
            "ts_ms": pa.array(ints // 1000, pa.int64()).cast(pa.timestamp("ms")),
            "ts_us_utc": masked(pa.array(ints, pa.int64()).cast(pa.timestamp("us", tz="UTC"))),
            "ts_ns": pa.array(ints * 1000, pa.int64()).cast(pa.timestamp("ns")),
            "string": masked(pa.array(strings, pa.string())),
            "large_string": pa.array(strings, pa.large_string()),
            "binary": pa.array([s.encode() * (1 + len(s) % 5) for s in strings], pa.binary()),
            "fixed": pa.array([uuid.UUID(int=int(v) % 2**128).bytes for v in ints], pa.binary(16)),
            "dict_string": pa.array([f"k{v % 97}" for v in ints]).dictionary_encode(),
            "struct": pa.StructArray.from_arrays(
                [pa.array(ints % 1000), pa.array([f"n{v % 50}" for v in ints])], names=["a", "b"]
            ),
            "tags": pa.array([[f"t{v % 7}", f"t{v % 11}"] for v in ints], pa.list_(pa.string())),
        }
    )


def leaf_columns(table: pa.Table) -> dict[str, pa.ChunkedArray | pa.Array]:
    """Leaf arrays by Parquet dotted path, as pyarrow names them."""
    out: dict[str, pa.ChunkedArray | pa.Array] = {}

    def walk(path: str, arr: pa.Array) -> None:
        if pa.types.is_struct(arr.type):
            for i in range(arr.type.num_fields):
                walk(f"{path}.{arr.type.field(i).name}", pc.struct_field(arr, [i]))
        elif pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
            walk(f"{path}.list.{arr.type.value_field.name}", pc.list_flatten(arr))
        else:
            out[path] = arr

    for name in table.column_names:
        walk(name, table.column(name).combine_chunks())
    return out


def write_pyarrow(path: Path, table: pa.Table, fpp: float = 0.01, **kwargs: object) -> Path:
    # pyarrow names a list's leaf "element" in the file (compliant nested types), whatever the
    # Arrow field is called in memory.
    columns = [c.replace(".list.item", ".list.element") for c in leaf_columns(table)]
    options = {c: {"ndv": ROW_GROUP_SIZE, "fpp": fpp} for c in columns}
    pq.write_table(
        table, path, row_group_size=ROW_GROUP_SIZE, bloom_filter_options=options, **kwargs
    )
    return path


def write_deltalake(directory: Path, table: pa.Table, fpp: float = 0.01) -> list[Path]:
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties, write_deltalake

    props = WriterProperties(
        max_row_group_size=ROW_GROUP_SIZE,
        default_column_properties=ColumnProperties(
            bloom_filter_properties=BloomFilterProperties(True, fpp, ROW_GROUP_SIZE)
        ),
    )
    write_deltalake(str(directory), table, writer_properties=props)
    return sorted(directory.glob("*.parquet"))


def write_duckdb(path: Path, rows: int = ROWS) -> Path:
    import duckdb

    with duckdb.connect() as con:
        con.sql(
            f"""
            copy (
              select i::bigint as int64, (i % 200)::integer as int32, (i % 100)::smallint as int16,
                     'v' || (i % 300) as string, (i % 150)::double / 4 as float64,
                     ((i % 300)::float / 8)::float as float32,
                     date '2024-01-01' + (i % 400)::integer as date,
                     timestamp '2024-01-01' + to_seconds(i % 250) as ts,
                     ((i % 120)::decimal(18, 3)) / 7 as decimal_18,
                     ((i % 120)::decimal(9, 2)) / 3 as decimal_9
              from range({rows}) t(i)
            ) to '{path}' (format parquet, row_group_size {ROW_GROUP_SIZE})
            """
        )
    return path


def rewrite_footer(src: Path, dst: Path, mutate: object) -> Path:
    """Copy ``src`` to ``dst`` with its footer decoded, passed to ``mutate(metadata)`` and
    re-encoded: a way to make footers that no writer makes (old, odd or hostile)."""
    from parquet_bloom import _format as fmt

    data = src.read_bytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    footer_start = len(data) - 8 - footer_len
    md = fmt.decode_file_metadata(data[footer_start:-8], full=True)
    mutate(md)  # type: ignore[operator]
    footer = fmt.encode_file_metadata(md)
    dst.write_bytes(data[:footer_start] + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    return dst


def drop_bloom_filter_lengths(md: object) -> None:
    """Make a footer look like one from before format 2.10, which had no bloom_filter_length."""
    for rg in md.row_groups:  # type: ignore[attr-defined]
        for chunk in rg.columns:
            chunk.meta_data.bloom_filter_length = None


# -- shared by the audit, CLI and testing tests: a nested table, and files made wrong ------------

NUM_ROW_GROUPS = ROWS // ROW_GROUP_SIZE


def nested_table(rows: int = ROWS, seed: int = 0) -> pa.Table:
    """Flat and nested columns (struct, list, map) of the common logical types, with nulls and
    repeats, plus a column written without a filter (``nofilter``)."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-(2**40), 2**40, rows)
    null = rng.random(rows) < 0.05
    base = dt.datetime(2024, 1, 1)
    return pa.table(
        {
            "int64": pa.array(ints, mask=null),
            "small": pa.array(ints % 300, pa.int16()),
            "s": pa.array([f"user-{v % 1000}" for v in ints]),
            "ts": pa.array(ints // 1000, pa.int64()).cast(pa.timestamp("us")),
            "date": pa.array([(base + dt.timedelta(days=int(v % 900))).date() for v in ints]),
            "dec": pa.array(
                [decimal.Decimal(int(v % 10**7)).scaleb(-2) for v in ints], pa.decimal128(9, 2)
            ),
            "d": pa.array(ints / 3),
            "st": pa.StructArray.from_arrays(
                [pa.array(ints % 1000), pa.array([f"n{v % 50}" for v in ints])], names=["a", "b"]
            ),
            "tags": pa.array([[f"t{v % 7}", f"t{v % 11}"] for v in ints], pa.list_(pa.string())),
            "m": pa.array(
                [[(f"k{v % 5}", int(v % 3))] for v in ints], pa.map_(pa.string(), pa.int64())
            ),
            "nofilter": pa.array(ints % 10),
        }
    )


# The leaves of nested_table() that write_nested_pyarrow() gives a filter (all but "nofilter").
NESTED_FILTERED = [
    "int64", "small", "s", "ts", "date", "dec", "d", "st.a", "st.b", "tags.list.element",
    "m.key_value.key", "m.key_value.value",
]  # fmt: skip


def write_nested_pyarrow(path: Path, fpp: float = 0.05) -> Path:
    """nested_table() by Arrow C++ at its default rate, sized for the row group, folded."""
    options = {c: {"ndv": ROW_GROUP_SIZE, "fpp": fpp} for c in NESTED_FILTERED}
    pq.write_table(
        nested_table(), path, row_group_size=ROW_GROUP_SIZE, bloom_filter_options=options
    )
    return path


def chunk_meta(path: Path, row_group: int, column: str) -> Any:
    """pyarrow's ColumnChunkMetaData of one column chunk, found by its dotted path."""
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(row_group)
    (i,) = [i for i in range(rg.num_columns) if rg.column(i).path_in_schema == column]
    return rg.column(i)


def zero_bitset(src: Path, dst: Path, row_group: int, column: str) -> Path:
    """``src`` with one chunk's filter bits all zero: every value of the chunk goes missing."""
    from parquet_bloom import _format as fmt

    data = bytearray(src.read_bytes())
    meta = chunk_meta(src, row_group, column)
    offset = meta.bloom_filter_offset
    header, header_len = fmt.parse_bloom_filter_header(bytes(data[offset : offset + 64]))
    start = offset + header_len
    data[start : start + header.num_bytes] = bytes(header.num_bytes)
    dst.write_bytes(bytes(data))
    return dst


def splice_filter(
    src: Path, dst: Path, row_group: int, column: str, f: SplitBlockBloomFilter
) -> Path:
    """``src`` with ``f`` appended after the column data and pointed to by one chunk's footer entry,
    as a writer that sized the filter its own way would have written it."""
    from parquet_bloom import _format as fmt

    data = src.read_bytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    footer_start = len(data) - 8 - footer_len
    md = fmt.decode_file_metadata(data[footer_start:-8], full=True)
    leaves = {leaf.path: leaf.column_index for leaf in fmt.schema_leaves(md)}
    blob = fmt.encode_bloom_filter_header(f.num_bytes) + f.to_bytes()
    meta = md.row_groups[row_group].columns[leaves[column]].meta_data
    meta.bloom_filter_offset = footer_start
    meta.bloom_filter_length = len(blob)
    footer = fmt.encode_file_metadata(md)
    dst.write_bytes(
        data[:footer_start] + blob + footer + len(footer).to_bytes(4, "little") + b"PAR1"
    )
    return dst


def leaf_values(path: Path, row_group: int, column: str) -> pa.Array:
    """A leaf column's values in one row group, found independently of audit's own walk."""
    table = pq.ParquetFile(path).read_row_group(row_group)
    top, *rest = column.split(".")
    arr = table.column(top).combine_chunks()
    if pa.types.is_map(arr.type):
        return arr.keys if rest[-1] == "key" else arr.items
    return leaf_columns(pa.table({top: arr}))[column]


def chunk_hashes(path: Path, row_group: int, column: str) -> np.ndarray:
    """The distinct hashes of one column chunk's values, as its writer should have inserted."""
    from parquet_bloom import BloomFilterReader
    from parquet_bloom import _format as fmt
    from parquet_bloom import _logical as logical

    with BloomFilterReader(path) as reader:
        leaf = {x.path: x for x in fmt.schema_leaves(reader.metadata)}[column]
    return np.unique(logical.column_hashes(leaf_values(path, row_group, column), leaf))


# -- ClickHouse (chDB) ---------------------------------------------------------------------------

# One column per ClickHouse type its Parquet writer maps, with repeats, nulls and nested leaves:
# (name, expression over `number`). Every value is a function of the row number, so a file is the
# same whatever the run.
CHDB_COLUMNS = [
    ("int8", "toInt8(number % 200 - 100)"),
    ("int16", "toInt16(toInt32(intHash32(number) % 3000) - 1500)"),
    ("int32", "toInt32(toInt64(intHash32(number) % 100000) - 50000)"),
    ("int64", "toInt64(intHash64(number))"),
    ("uint8", "toUInt8(number % 250)"),
    ("uint16", "toUInt16(intHash32(number) % 60000)"),
    ("uint32", "toUInt32(intHash32(number))"),
    ("uint64", "intHash64(number) % 1000000 * 18446744073709"),
    ("float32", "toFloat32(intHash32(number) % 7000 / 7)"),
    ("float64", "toFloat64(intHash32(number)) / 3"),
    ("bool", "toBool(intHash32(number) % 3 = 0)"),
    ("string", "concat('k', toString(intHash32(number) % 5000))"),
    ("fixed_string", "toFixedString(hex(intHash32(number) % 40000), 8)"),
    ("date", "toDate('2020-01-01') + intHash32(number) % 2000"),
    ("date32", "toDate32('1950-01-01') + intHash32(number) % 30000"),
    ("datetime", "toDateTime('2024-01-01 00:00:00', 'UTC') + intHash32(number) % 86400"),
    ("datetime64_ms", "toDateTime64(1700000000, 3, 'UTC') + toIntervalMillisecond(number * 37)"),
    ("datetime64_us", "toDateTime64(1700000000, 6, 'UTC') + toIntervalMicrosecond(number * 7)"),
    ("decimal32", "toDecimal32(intHash32(number) % 99999, 2)"),
    ("decimal64", "toDecimal64(intHash32(number) % 999999, 4) - toDecimal64(50, 4)"),
    ("decimal128", "toDecimal128(intHash32(number) % 77777, 6)"),
    ("decimal256", "toDecimal256(intHash32(number) % 555, 10)"),
    ("uuid", "generateUUIDv4(number)"),
    ("int128", "toInt128(intHash32(number) % 4444) - 2000"),
    ("uint256", "toUInt256(intHash64(number) % 3333)"),
    ("ipv4", "toIPv4(intHash32(number) % 100000)"),
    ("low_cardinality", "toLowCardinality(concat('lc', toString(number % 50)))"),
    ("enum8", "CAST(number % 3 AS Enum8('a' = 0, 'b' = 1, 'c' = 2))"),
    ("nullable_int64", "if(number % 17 = 0, NULL, toInt64(intHash32(number) % 9000))"),
    ("nullable_string", "if(number % 13 = 0, NULL, concat('user-', toString(number % 20000)))"),
    ("nullable_float64", "if(number % 11 = 0, NULL, toFloat64(number % 700) / 8)"),
    ("nullable_date", "if(number % 7 = 0, NULL, toDate('2001-01-01') + number % 900)"),
    ("all_null", "CAST(NULL AS Nullable(Int32))"),
    ("array", "[toInt32(number % 100), toInt32(intHash32(number) % 37)]"),
    ("array_nullable", "[if(number % 5 = 0, NULL, toString(number % 61)), 'x']"),
    ("tuple", "tuple(toInt64(number % 500), toString(number % 40))::Tuple(a Int64, b String)"),
    ("map", "map(concat('m', toString(number % 9)), toInt32(intHash32(number) % 21))"),
]


def write_chdb(
    path: Path,
    rows: int = ROWS,
    row_group_size: int = ROW_GROUP_SIZE,
    columns: list[tuple[str, str]] | None = None,
    settings: dict[str, object] | None = None,
) -> Path:
    """CHDB_COLUMNS (or ``columns``) written by ClickHouse's own Parquet writer, in chDB, with its
    Bloom filters on and row groups of exactly ``row_group_size`` rows (one thread, blocks of a
    row group each). ``settings`` are more ClickHouse settings, e.g.
    ``output_format_parquet_bloom_filter_bits_per_value``."""
    import chdb

    selects = ", ".join(f"{expr} AS {name}" for name, expr in columns or CHDB_COLUMNS)
    options = {
        "output_format_parquet_write_bloom_filter": 1,
        "output_format_parquet_row_group_size": row_group_size,
        "max_block_size": row_group_size,
        "max_threads": 1,
        **(settings or {}),
    }
    chdb.query(
        f"INSERT INTO FUNCTION file('{path}', Parquet) SELECT {selects} FROM numbers({rows}) "
        f"SETTINGS {', '.join(f'{k} = {v}' for k, v in options.items())}"
    )
    return path
