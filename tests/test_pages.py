"""Column chunk pages read straight from the file (``parquet_bloom.pages``).

``chunk_hashes`` does without pyarrow: it decompresses each page, steps over the levels and
hashes the value bytes where they lie. Its answer must be exactly the set of hashes the Arrow
path gives (``encoding.column_hashes`` on the chunk's values as pyarrow reads them back, itself
tested against the writers' own filters), so the tests compare with that, on files the real
writers write during the run: pyarrow across page versions, codecs, dictionary, PLAIN,
dictionary-then-PLAIN and BYTE_STREAM_SPLIT pages and every physical type but BOOLEAN; DuckDB;
deltalake (arrow-rs).

Then what only this path does: dictionary entries no row uses stay out; pages that cannot add
anything are not read; the ``out`` buffer is used when it has room; what is not read here is
handed back as ``NeedsArrow``; the RLE / bit-packing hybrid decoder agrees with a scalar encoder
written from the spec; and damaged bytes (cut short, overwritten) fail as ``CorruptFileError``
with an offset in the chunk, never as whatever numpy or struct happened to raise.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime as dt
import decimal
import io
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.transport.TTransport import TMemoryBuffer

from parquet_bloom import _format as fmt
from parquet_bloom import rewrite_bloom_filters
from parquet_bloom._logical import column_hashes
from parquet_bloom._pages import (
    MAX_LOOPED_VALUES,
    MAX_PAGE_SIZE,
    PAGE_HEADER_GUESS,
    HashBuffer,
    NeedsArrow,
    chunk_hashes,
    rle_hybrid,
    supported,
)
from parquet_bloom._thrift.parquet import ttypes as tt
from parquet_bloom._thrift.parquet.ttypes import Statistics
from parquet_bloom.errors import CorruptFileError
from parquet_bloom.testing import assert_bloom_filters_valid
from tests import skips

# Every test here runs with the compiled kernels and on numpy alone (see conftest.py).
pytestmark = pytest.mark.usefixtures("implementation")

ROWS = 3_000
ROW_GROUP_SIZE = 1_500

# -- chunks, their pages and the reference ----------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One column chunk of a file: its row group, schema leaf and ColumnMetaData."""

    path: Path
    row_group: int
    leaf: fmt.SchemaLeaf
    meta: Any

    @property
    def start(self) -> int:
        """The first page's offset (a dictionary page offset counts when before the data)."""
        dictionary = self.meta.dictionary_page_offset
        if dictionary is not None and 0 < dictionary < self.meta.data_page_offset:
            return int(dictionary)
        return int(self.meta.data_page_offset)

    @property
    def end(self) -> int:
        return self.start + int(self.meta.total_compressed_size)


def footer_of(data: bytes) -> Any:
    length = int.from_bytes(data[-8:-4], "little")
    return fmt.decode_file_metadata(data[-8 - length : -8], full=True)


def chunks_of(path: Path) -> list[Chunk]:
    md = footer_of(path.read_bytes())
    leaves = fmt.schema_leaves(md)
    return [
        Chunk(path, i, leaf, column.meta_data)
        for i, row_group in enumerate(md.row_groups)
        for leaf, column in zip(leaves, row_group.columns, strict=True)
    ]


def chunk_named(path: Path, column: str, row_group: int = 0) -> Chunk:
    (chunk,) = [c for c in chunks_of(path) if c.leaf.path == column and c.row_group == row_group]
    return chunk


def read_hashes(chunk: Chunk, out: np.ndarray | None = None) -> np.ndarray:
    with open(chunk.path, "rb") as file:
        return chunk_hashes(file, chunk.meta, chunk.leaf, out)


def leaf_values(table: pa.Table, leaf: fmt.SchemaLeaf) -> pa.Array:
    """The leaf's values in ``table`` as pyarrow read them: its path followed down through
    structs, lists and maps, whatever the writer named their inner groups."""
    top, *rest = leaf.path_in_schema
    values = table.column(top).combine_chunks()
    while rest:
        kind = values.type
        if pa.types.is_map(kind):  # <map> / <key_value or entries> / <key or value>
            values = values.keys if rest[1] == kind.key_field.name else values.items
            rest = rest[2:]
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):  # <list> / <list> / <item>
            values = pc.list_flatten(values)
            rest = rest[2:]
        elif pa.types.is_struct(kind):
            values = pc.struct_field(values, [kind.get_field_index(rest[0])])
            rest = rest[1:]
        else:
            raise AssertionError(f"{leaf.path}: no way down from {kind} to {rest}")
    return values


def reference_hashes(chunk: Chunk) -> np.ndarray:
    """The Arrow path's hashes of the chunk's values, as pyarrow reads them back (its column
    alone: the row group's other columns may be damaged)."""
    table = pq.ParquetFile(chunk.path).read_row_group(
        chunk.row_group, columns=[chunk.leaf.path_in_schema[0]]
    )
    return column_hashes(leaf_values(table, chunk.leaf), chunk.leaf)


def same_hashes(ours: np.ndarray, reference: np.ndarray) -> bool:
    return ours.dtype == np.uint64 and np.array_equal(np.unique(ours), np.unique(reference))


def mismatches(path: Path) -> list[str]:
    """The chunks of ``path`` whose pages do not give the Arrow path's hashes (a NeedsArrow
    counts: every chunk these tests write must be read here)."""
    parquet_file = pq.ParquetFile(path)
    tables: dict[int, pa.Table] = {}
    wrong = []
    with open(path, "rb") as file:
        for chunk in chunks_of(path):
            if chunk.row_group not in tables:
                tables[chunk.row_group] = parquet_file.read_row_group(chunk.row_group)
            where = f"row group {chunk.row_group} column {chunk.leaf.path}"
            reference = column_hashes(leaf_values(tables[chunk.row_group], chunk.leaf), chunk.leaf)
            try:
                ours = chunk_hashes(file, chunk.meta, chunk.leaf)
            except NeedsArrow as err:
                wrong.append(f"{where}: NeedsArrow({err})")
                continue
            if not same_hashes(ours, reference):
                wrong.append(
                    f"{where}: {len(np.unique(ours))} distinct hashes, pyarrow's values give "
                    f"{len(np.unique(reference))}"
                )
    return wrong


def page_headers(data: bytes, chunk: Chunk) -> list[Any]:
    headers = []
    pos = chunk.start
    while pos < chunk.end:
        header, size = fmt.parse_page_header(data[pos : chunk.end])
        headers.append(header)
        pos += size + header.compressed_page_size
    return headers


def data_page_encoding(header: Any) -> int:
    sub = header.data_page_header or header.data_page_header_v2
    return int(sub.encoding)


def layout(path: Path) -> set[str]:
    """What the writer did, in the words the configurations below expect: page kinds, codecs,
    value encodings by physical type, physical types, dictionaries falling back to PLAIN or
    spread over many pages."""
    data = path.read_bytes()
    facts = set()
    kinds: set[int] = set()
    for chunk in chunks_of(path):
        headers = page_headers(data, chunk)
        physical = chunk.leaf.physical_type
        facts.add(physical)
        facts.add(f"codec {fmt.CompressionCodec._VALUES_TO_NAMES[chunk.meta.codec]}")
        if chunk.leaf.converted_type == "DECIMAL":
            facts.add(f"decimal as {physical}")
        kinds |= {header.type for header in headers}
        data_pages = [h for h in headers if h.type != fmt.PageType.DICTIONARY_PAGE]
        encodings = {data_page_encoding(h) for h in data_pages}
        facts |= {f"{fmt.Encoding._VALUES_TO_NAMES[e]} {physical}" for e in encodings}
        if len(data_pages) >= 8:
            facts.add("many pages")
            if len(data_pages) < len(headers) and encodings == {fmt.Encoding.RLE_DICTIONARY}:
                facts.add("dictionary over many pages")
        if len(data_pages) < len(headers) and fmt.Encoding.PLAIN in encodings:
            facts.add("dictionary then PLAIN")
    for kind in (fmt.PageType.DATA_PAGE, fmt.PageType.DATA_PAGE_V2, fmt.PageType.DICTIONARY_PAGE):
        name = fmt.PageType._VALUES_TO_NAMES[kind]
        facts.add(name if kind in kinds else f"no {name}")
    return facts


# -- pyarrow: every physical type, page version, codec and value encoding ---------------------


def sample_table(rows: int = ROWS, seed: int = 0) -> pa.Table:
    """A column of each physical type pyarrow writes (BOOLEAN aside), nulls in every column,
    signed zeros and NaN, strings of one length and of many, empty binaries, and a struct, a
    list and a map."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-(2**40), 2**40, rows)
    few = rng.integers(0, 60, rows)
    null = rng.random(rows) < 0.1

    def with_nulls(values: Any, type: pa.DataType | None = None) -> pa.Array:
        return pa.array(values, type, mask=null)

    floats = few / 4 - 5
    floats[:3] = [-0.0, 0.0, np.nan]
    base = dt.date(2024, 1, 1)
    uuids = [uuid.UUID(int=int(v) % 2**128).bytes for v in ints]
    return pa.table(
        {
            "int8": with_nulls(few - 30, pa.int8()),
            "int16": with_nulls(few * 300, pa.int16()),
            "int32": with_nulls(ints % 2**31, pa.int32()),
            "uint32": with_nulls(ints % 2**32, pa.uint32()),
            "date": with_nulls([base + dt.timedelta(days=int(v % 900)) for v in ints], pa.date32()),
            "dec9": with_nulls(
                [decimal.Decimal(int(v % 10**7)).scaleb(-2) for v in ints], pa.decimal128(9, 2)
            ),
            "int64": with_nulls(ints, pa.int64()),
            "ts_us": with_nulls(ints, pa.int64()).cast(pa.timestamp("us")),
            "ts_ns": with_nulls(ints * 1000, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "dec18": with_nulls(
                [decimal.Decimal(int(v)).scaleb(-3) for v in ints], pa.decimal128(18, 3)
            ),
            "float": with_nulls(floats, pa.float32()),
            "double": with_nulls(floats * 1.5, pa.float64()),
            "uuid": with_nulls(uuids, pa.binary(16)).cast(pa.uuid()),
            "fixed7": with_nulls([int(v % 500).to_bytes(7, "little") for v in ints], pa.binary(7)),
            "dec30": with_nulls(
                [decimal.Decimal(int(v) * 10**9).scaleb(-4) for v in ints], pa.decimal128(30, 4)
            ),
            "same_length": with_nulls([f"{int(v) % 10**6:06d}" for v in ints]),
            "string": with_nulls([f"user-{int(v) % 700}" * (1 + int(v) % 3) for v in ints]),
            "binary": with_nulls(
                [b"" if v % 4 == 0 else int(v).to_bytes(3, "little") for v in few * 5],
                pa.binary(),
            ),
            "struct": pa.StructArray.from_arrays(
                [with_nulls(ints % 1000), with_nulls([f"n{v % 50}" for v in ints])],
                names=["a", "b"],
                mask=pa.array(rng.random(rows) < 0.05),
            ),
            "list": pa.array(
                [
                    None if v % 13 == 0 else [f"t{v % 7}", None if v % 4 == 0 else f"t{v % 11}"]
                    for v in ints
                ],
                pa.list_(pa.string()),
            ),
            "map": pa.array(
                [
                    None if v % 17 == 0 else [(f"k{v % 5}", int(v % 3)), (f"k{v % 9 + 5}", None)]
                    for v in ints
                ],
                pa.map_(pa.string(), pa.int64()),
            ),
        }
    )


BYTE_STREAM_SPLIT = {
    column: "BYTE_STREAM_SPLIT"
    for column in ("int32", "int64", "float", "double", "uuid", "fixed7", "dec30")
}
# Arrow C++ ends a page when it has data_page_size bytes after a batch of write_batch_size rows.
SMALL_PAGES = {"data_page_size": 512, "write_batch_size": 100}
# Each: pyarrow's write options, and what the file must then show (see layout()) so that the
# configuration really covers what its name says.
PYARROW_CONFIGURATIONS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "v1-uncompressed-dictionary": (
        {"compression": "none"},
        {"DATA_PAGE", "no DATA_PAGE_V2", "codec UNCOMPRESSED", "RLE_DICTIONARY BYTE_ARRAY"},
    ),
    "v2-snappy-dictionary-small-pages": (
        {"data_page_version": "2.0", "compression": "snappy", **SMALL_PAGES},
        {
            "DATA_PAGE_V2",
            "no DATA_PAGE",
            "codec SNAPPY",
            "RLE_DICTIONARY FIXED_LEN_BYTE_ARRAY",
            "dictionary over many pages",
        },
    ),
    "v1-gzip-plain": (
        {"compression": "gzip", "use_dictionary": False},
        {"DATA_PAGE", "codec GZIP", "no DICTIONARY_PAGE", "PLAIN BYTE_ARRAY", "PLAIN DOUBLE"},
    ),
    "v2-brotli-plain": (
        {"data_page_version": "2.0", "compression": "brotli", "use_dictionary": False},
        {"DATA_PAGE_V2", "codec BROTLI", "no DICTIONARY_PAGE", "PLAIN FIXED_LEN_BYTE_ARRAY"},
    ),
    "v1-zstd-dictionary-fallback-small-pages": (
        {"compression": "zstd", "dictionary_pagesize_limit": 128, **SMALL_PAGES},
        {"DATA_PAGE", "codec ZSTD", "dictionary then PLAIN", "many pages"},
    ),
    "v2-lz4-dictionary-fallback-small-pages": (
        {
            "data_page_version": "2.0",
            "compression": "lz4",
            "dictionary_pagesize_limit": 128,
            **SMALL_PAGES,
        },
        {"DATA_PAGE_V2", "codec LZ4_RAW", "dictionary then PLAIN", "many pages"},
    ),
    "v1-snappy-int96-integer-decimals-small-pages": (
        {
            "compression": "snappy",
            **SMALL_PAGES,
            "use_deprecated_int96_timestamps": True,
            "store_decimal_as_integer": True,
        },
        {
            "INT96",
            "decimal as INT32",
            "decimal as INT64",
            "RLE_DICTIONARY INT96",
            "dictionary over many pages",
        },
    ),
    "v2-uncompressed-int96-integer-decimals-plain-small-pages": (
        {
            "data_page_version": "2.0",
            "compression": "none",
            "use_dictionary": False,
            **SMALL_PAGES,
            "use_deprecated_int96_timestamps": True,
            "store_decimal_as_integer": True,
        },
        {"DATA_PAGE_V2", "PLAIN INT96", "decimal as INT32", "many pages"},
    ),
    "v1-uncompressed-byte-stream-split": (
        {"compression": "none", "use_dictionary": False, "column_encoding": BYTE_STREAM_SPLIT},
        {
            "DATA_PAGE",
            "BYTE_STREAM_SPLIT INT32",
            "BYTE_STREAM_SPLIT INT64",
            "BYTE_STREAM_SPLIT FLOAT",
            "BYTE_STREAM_SPLIT DOUBLE",
            "BYTE_STREAM_SPLIT FIXED_LEN_BYTE_ARRAY",
        },
    ),
    "v2-zstd-byte-stream-split-small-pages": (
        {
            "data_page_version": "2.0",
            "compression": "zstd",
            "use_dictionary": False,
            "column_encoding": BYTE_STREAM_SPLIT,
            **SMALL_PAGES,
        },
        {
            "DATA_PAGE_V2",
            "BYTE_STREAM_SPLIT DOUBLE",
            "BYTE_STREAM_SPLIT FIXED_LEN_BYTE_ARRAY",
            "many pages",
        },
    ),
}


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return sample_table()


@pytest.mark.parametrize("configuration", PYARROW_CONFIGURATIONS)
def test_every_pyarrow_chunk_gives_the_arrow_paths_hashes(
    table: pa.Table, tmp_path: Path, configuration: str
) -> None:
    options, expected_layout = PYARROW_CONFIGURATIONS[configuration]
    path = tmp_path / f"{configuration}.parquet"
    pq.write_table(table, path, row_group_size=ROW_GROUP_SIZE, **options)
    assert expected_layout <= layout(path)
    assert mismatches(path) == []


# -- DuckDB and deltalake (arrow-rs) ------------------------------------------------------------


def test_every_duckdb_chunk_gives_the_arrow_paths_hashes(tmp_path: Path) -> None:
    path = tmp_path / "duckdb.parquet"
    with duckdb.connect() as con:
        con.sql(
            f"""
            copy (
              select i::bigint as int64, (i % 200)::integer as int32,
                     (i % 100)::smallint as int16,
                     case when i % 10 = 0 then null else 'v' || (i % 300) end as string,
                     'x' || repeat('y', (i % 7)::integer) || (i % 5000) as varying,
                     (i % 150)::double / 4 as float64, ((i % 300)::float / 8)::float as float32,
                     date '2024-01-01' + (i % 400)::integer as date,
                     timestamp '2024-01-01' + to_seconds(i % 250) as ts,
                     ((i % 120) / 7)::decimal(18, 3) as decimal_18,
                     ((i % 120) / 3)::decimal(9, 2) as decimal_9,
                     ((i % 120) / 3)::decimal(30, 4) as decimal_30,
                     ('00000000-0000-0000-0000-' || lpad((i % 1000)::varchar, 12, '0'))::uuid
                       as uuid,
                     case when i % 9 = 0 then null else [i % 5, i % 7] end as list,
                     {{'a': i % 3, 'b': 'b' || (i % 11)}} as struct,
                     map(['k' || (i % 4)], [i % 9]) as map
              from range({ROWS}) t(i)
            ) to '{path}' (format parquet, row_group_size {ROW_GROUP_SIZE})
            """
        )
    physical = {chunk.leaf.physical_type for chunk in chunks_of(path)}
    assert {"INT32", "INT64", "DOUBLE", "FLOAT", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"} <= physical
    assert mismatches(path) == []


def test_every_deltalake_chunk_gives_the_arrow_paths_hashes(
    table: pa.Table, tmp_path: Path
) -> None:
    from deltalake import WriterProperties, write_deltalake

    props = WriterProperties(
        max_row_group_size=ROW_GROUP_SIZE,
        data_page_row_count_limit=200,
        write_batch_size=200,
        dictionary_page_size_limit=512,
        compression="ZSTD",
    )
    write_deltalake(str(tmp_path), table.drop_columns(["uuid", "uint32"]), writer_properties=props)
    (path,) = sorted(tmp_path.glob("*.parquet"))
    assert {"many pages", "dictionary then PLAIN", "codec ZSTD"} <= layout(path)
    assert mismatches(path) == []


# -- dictionary entries no row uses ------------------------------------------------------------


CATEGORIES = pa.array([f"category-{i}" for i in range(40)])
USED_CATEGORIES = np.arange(0, len(CATEGORIES), 4)


def categories_column(kind: str, rows: int = 1_000) -> pa.DictionaryArray:
    """Rows referring to every fourth of 40 categories, every ninth row null."""
    codes = np.resize(USED_CATEGORIES, rows).astype(np.int32)
    codes[::9] = -1
    if kind == "pandas-categorical":
        return pa.array(pd.Categorical.from_codes(codes, categories=CATEGORIES.to_pylist()))
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), CATEGORIES)


@pytest.mark.parametrize("data_page_version", ["1.0", "2.0"])
@pytest.mark.parametrize("kind", ["arrow-dictionary", "pandas-categorical"])
def test_dictionary_entries_no_row_uses_are_not_hashed(
    tmp_path: Path, kind: str, data_page_version: str
) -> None:
    # Arrow C++ writes a string dictionary array's whole dictionary into each dictionary page,
    # entries no row refers to included; the filter must hold only the chunk's values.
    path = tmp_path / "categories.parquet"
    pq.write_table(
        pa.table({"category": categories_column(kind)}),
        path,
        row_group_size=500,
        data_page_size=256,
        write_batch_size=50,
        data_page_version=data_page_version,
    )
    data = path.read_bytes()
    unused = CATEGORIES.filter(~np.isin(np.arange(len(CATEGORIES)), USED_CATEGORIES))
    for chunk in chunks_of(path):
        dictionary_page, *data_pages = page_headers(data, chunk)
        assert dictionary_page.dictionary_page_header.num_values == len(CATEGORIES)
        assert len(data_pages) > 1
        ours = read_hashes(chunk)
        assert not np.isin(column_hashes(unused, chunk.leaf), ours).any()
        assert same_hashes(ours, reference_hashes(chunk))


# -- pages that cannot add anything are not read -----------------------------------------------


class CountingFile:
    """A file that counts the bytes read through it."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.bytes_read = 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.file.seek(offset, whence)

    def tell(self) -> int:
        return self.file.tell()

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.bytes_read += len(data)
        return data


@pytest.mark.parametrize("new_value_on_the_last_page", [False, True])
def test_dictionary_pages_are_skipped_once_every_entry_is_referred_to(
    tmp_path: Path, new_value_on_the_last_page: bool
) -> None:
    # 1,000 distinct values, all on the first of 10 pages of ~125 KB (10-bit indices): once
    # each dictionary entry is referred to the other pages cannot add a value. A value first
    # seen on the last page makes every page count.
    rows = 1_000_000
    values = np.arange(rows, dtype=np.int32) % 1_000
    if new_value_on_the_last_page:
        values[-1] = 1_000
    path = tmp_path / "repeats.parquet"
    pq.write_table(
        pa.table({"x": values}),
        path,
        row_group_size=rows,
        max_rows_per_page=rows // 10,
        compression="none",
        write_statistics=False,
    )
    (chunk,) = chunks_of(path)
    assert len(page_headers(path.read_bytes(), chunk)) == 11  # the dictionary and 10 pages
    with open(path, "rb") as file:
        counting = CountingFile(file)
        ours = chunk_hashes(counting, chunk.meta, chunk.leaf)
    assert same_hashes(ours, reference_hashes(chunk))
    total = chunk.meta.total_compressed_size
    if new_value_on_the_last_page:
        assert counting.bytes_read >= total
    else:
        assert counting.bytes_read * 3 < total


# -- the out buffer -----------------------------------------------------------------------------


def small_table(rows: int = 64) -> pa.Table:
    """Two columns of a few pages each: int64 with nulls, strings of varying length."""
    rng = np.random.default_rng(1)
    ints = rng.integers(0, 50, rows)
    return pa.table(
        {
            "i": pa.array(ints * 1_000, mask=rng.random(rows) < 0.1),
            "s": pa.array([f"s{v}" * (1 + v % 3) for v in ints]),
        }
    )


def write_small(path: Path, **options: Any) -> Path:
    pq.write_table(small_table(), path, data_page_size=64, write_batch_size=16, **options)
    return path


@pytest.mark.parametrize("spare", [0, 100])
@pytest.mark.parametrize("column", ["i", "s"])
def test_hashes_land_in_an_out_buffer_with_room(tmp_path: Path, column: str, spare: int) -> None:
    chunk = chunk_named(write_small(tmp_path / "small.parquet"), column)
    out = np.zeros(chunk.meta.num_values + spare, dtype=np.uint64)
    ours = read_hashes(chunk, out)
    assert np.shares_memory(ours, out)
    assert same_hashes(ours, reference_hashes(chunk))


@pytest.mark.parametrize(
    "make_out",
    [
        lambda n: np.full(n - 1, 7, dtype=np.uint64),
        lambda n: np.full(n, 7, dtype=np.int64),
        lambda n: np.full((n, 2), 7, dtype=np.uint64),
    ],
    ids=["one-too-small", "int64", "two-dimensional"],
)
def test_an_out_buffer_without_room_is_left_alone(
    tmp_path: Path, make_out: Callable[[int], np.ndarray]
) -> None:
    chunk = chunk_named(write_small(tmp_path / "small.parquet"), "s")
    out = make_out(chunk.meta.num_values)
    ours = read_hashes(chunk, out)
    assert not np.shares_memory(ours, out)
    assert (out == 7).all()
    assert same_hashes(ours, reference_hashes(chunk))


# -- what is left to pyarrow --------------------------------------------------------------------


DELTA_ENCODED = {
    "DELTA_BINARY_PACKED": pa.array(np.arange(2_000) * 7),
    "DELTA_LENGTH_BYTE_ARRAY": pa.array([f"v{i % 300}" * (1 + i % 3) for i in range(2_000)]),
    "DELTA_BYTE_ARRAY": pa.array([f"prefix-{i % 300}" for i in range(2_000)]),
}


@pytest.mark.parametrize("encoding", DELTA_ENCODED)
@pytest.mark.parametrize("footer_lists_it", [True, False])
def test_delta_encodings_need_arrow(tmp_path: Path, encoding: str, footer_lists_it: bool) -> None:
    path = tmp_path / "delta.parquet"
    pq.write_table(
        pa.table({"x": DELTA_ENCODED[encoding]}),
        path,
        use_dictionary=False,
        column_encoding={"x": encoding},
    )
    (chunk,) = chunks_of(path)
    meta = chunk.meta
    assert getattr(fmt.Encoding, encoding) in meta.encodings
    if not footer_lists_it:  # a writer that lists only its level encodings: found on the page
        meta = copy.copy(meta)
        meta.encodings = [fmt.Encoding.PLAIN, fmt.Encoding.RLE]
    assert supported(meta, chunk.leaf) is not footer_lists_it
    with open(path, "rb") as file, pytest.raises(NeedsArrow):
        chunk_hashes(file, meta, chunk.leaf)


def test_many_byte_array_values_of_varying_lengths_need_arrow_on_numpy_alone(
    tmp_path: Path, implementation: str
) -> None:
    # On numpy alone only a Python loop can split values of varying lengths; past
    # MAX_LOOPED_VALUES of them in one chunk pyarrow is faster. Up to that many are read here,
    # and any number of values of one length; the compiled kernels split any number.
    rows = MAX_LOOPED_VALUES + 1_000
    table = pa.table(
        {
            "varying": pa.array(["x" * (i % 13) for i in range(rows)]),
            "same_length": pa.array([f"{i % 1_000:08d}" for i in range(rows)]),
        }
    )
    one_chunk = tmp_path / "one-chunk.parquet"
    pq.write_table(table, one_chunk, use_dictionary=False, row_group_size=rows)
    varying = chunk_named(one_chunk, "varying")
    assert supported(varying.meta, varying.leaf)
    if implementation == "numpy":
        with pytest.raises(NeedsArrow):
            read_hashes(varying)
    else:
        assert same_hashes(read_hashes(varying), reference_hashes(varying))
    same_length = chunk_named(one_chunk, "same_length")
    assert same_hashes(read_hashes(same_length), reference_hashes(same_length))

    at_the_limit = tmp_path / "at-the-limit.parquet"
    pq.write_table(table, at_the_limit, use_dictionary=False, row_group_size=MAX_LOOPED_VALUES)
    varying = chunk_named(at_the_limit, "varying")
    assert varying.meta.num_values == MAX_LOOPED_VALUES
    assert same_hashes(read_hashes(varying), reference_hashes(varying))


def test_the_ambiguous_lz4_codec_and_boolean_columns_need_arrow(tmp_path: Path) -> None:
    path = tmp_path / "small.parquet"
    pq.write_table(
        pa.table({"i": pa.array(np.arange(100)), "flag": pa.array(np.arange(100) % 3 == 0)}),
        path,
        compression="lz4",
    )
    lz4_raw = chunk_named(path, "i")
    assert supported(lz4_raw.meta, lz4_raw.leaf)
    hadoop_or_raw = copy.copy(lz4_raw.meta)
    hadoop_or_raw.codec = fmt.CompressionCodec.LZ4
    assert not supported(hadoop_or_raw, lz4_raw.leaf)
    with open(path, "rb") as file, pytest.raises(NeedsArrow):
        chunk_hashes(file, hadoop_or_raw, lz4_raw.leaf)
    boolean = chunk_named(path, "flag")
    assert not supported(boolean.meta, boolean.leaf)
    with pytest.raises(NeedsArrow):
        read_hashes(boolean)


# -- the RLE / bit-packing hybrid against a scalar encoder from Encodings.md -------------------


@dataclass(frozen=True)
class RleRun:
    value: int
    length: int


@dataclass(frozen=True)
class PackedRun:
    values: tuple[int, ...]  # a multiple of 8 of them


def uleb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode_hybrid(runs: list[RleRun | PackedRun], bit_width: int) -> bytes:
    """Encodings.md, "Run Length Encoding / Bit-Packing Hybrid": an RLE run is the header
    ``length << 1`` and the value in ceil(bit_width / 8) little-endian bytes; a bit-packed run
    is ``groups << 1 | 1`` and groups * 8 values packed from each byte's least significant
    bit."""
    out = bytearray()
    for run in runs:
        if isinstance(run, RleRun):
            out += uleb128(run.length << 1)
            out += run.value.to_bytes((bit_width + 7) // 8, "little")
        else:
            out += uleb128((len(run.values) // 8) << 1 | 1)
            bits = sum(value << (i * bit_width) for i, value in enumerate(run.values))
            out += bits.to_bytes(len(run.values) * bit_width // 8, "little")
    return bytes(out)


def first_values(
    runs: list[RleRun | PackedRun], count: int
) -> tuple[list[int], collections.Counter[int]]:
    """The first ``count`` values of the runs: those of bit-packed runs in order, and how often
    each value of an RLE run occurs."""
    packed: list[int] = []
    repeated: collections.Counter[int] = collections.Counter()
    for run in runs:
        if isinstance(run, RleRun):
            taken = min(run.length, count)
            repeated[run.value] += taken
        else:
            taken = min(len(run.values), count)
            packed += run.values[:taken]
        count -= taken
    return packed, repeated


@st.composite
def hybrid_streams(draw: st.DrawFn) -> tuple[int, list[RleRun | PackedRun]]:
    bit_width = draw(st.integers(0, 32))
    value = st.integers(0, (1 << bit_width) - 1)
    rle = st.builds(RleRun, value, st.integers(1, 1_000))
    packed = st.integers(1, 6).flatmap(
        lambda groups: st.lists(value, min_size=8 * groups, max_size=8 * groups).map(
            lambda values: PackedRun(tuple(values))
        )
    )
    return bit_width, draw(st.lists(st.one_of(rle, packed), max_size=10))


def total_values(runs: list[RleRun | PackedRun]) -> int:
    return sum(run.length if isinstance(run, RleRun) else len(run.values) for run in runs)


@settings(max_examples=200, deadline=None)
@given(hybrid_streams(), st.data())
def test_rle_hybrid_gives_the_first_count_values(
    stream: tuple[int, list[RleRun | PackedRun]], data: st.DataObject
) -> None:
    bit_width, runs = stream
    count = data.draw(st.integers(0, total_values(runs)))
    encoded = np.frombuffer(encode_hybrid(runs, bit_width), dtype=np.uint8)
    packed, repeated = rle_hybrid(encoded, bit_width, count)
    expected_packed, expected_repeated = first_values(runs, count)
    if bit_width == 0:  # zeros that take no bytes come back as a run, not as an array
        expected_repeated[0] += len(expected_packed)
        expected_packed = []
    assert packed.tolist() == expected_packed
    got_repeated: collections.Counter[int] = collections.Counter()
    for value, length in repeated:
        got_repeated[value] += length
    assert got_repeated == expected_repeated
    assert len(packed) + sum(length for _, length in repeated) == count


@pytest.mark.parametrize(
    ("stream", "bit_width"),
    # A value takes whole bytes, so only widths that are not multiples of 8 leave room.
    [(b"\x02\x02", 1), (b"\x02\x08", 3), (b"\x02\x00\x02", 9), (b"\x02\xff\x7f", 12)],
)
def test_an_rle_value_wider_than_the_bit_width_is_corrupt(stream: bytes, bit_width: int) -> None:
    # A definition level above the maximum would otherwise count as a null: a damaged level
    # stream must not silently drop values from the filter.
    with pytest.raises(CorruptFileError, match="wider than"):
        rle_hybrid(np.frombuffer(stream, dtype=np.uint8), bit_width, 1)


@settings(max_examples=100, deadline=None)
@given(hybrid_streams())
def test_rle_hybrid_cut_short_anywhere_is_corrupt(
    stream: tuple[int, list[RleRun | PackedRun]],
) -> None:
    # Asked for every value, the decoder needs every byte.
    bit_width, runs = stream
    encoded = encode_hybrid(runs, bit_width)
    count = total_values(runs)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptFileError):
            rle_hybrid(np.frombuffer(encoded[:cut], dtype=np.uint8), bit_width, count)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 32), st.integers(0, 5_000))
def test_rle_hybrid_on_any_bytes_decodes_or_is_corrupt(
    garbage: bytes, bit_width: int, count: int
) -> None:
    # Or needs pyarrow to decide: a bit-packed run cut short of its groups.
    try:
        packed, repeated = rle_hybrid(np.frombuffer(garbage, dtype=np.uint8), bit_width, count)
    except (CorruptFileError, NeedsArrow):
        return
    assert len(packed) + sum(length for _, length in repeated) == count
    assert all(value < 1 << bit_width for value in packed.tolist())


def scan_reference(
    data: bytes, bit_width: int, count: int, num_marks: int, target: int
) -> tuple[str, object, object]:
    """What the compiled rle_scan must answer, from rle_hybrid and _refer's checks: the
    entries marked and the values equal to ``target``, or the error, as _pages raises it."""
    try:
        packed, runs = rle_hybrid(np.frombuffer(data, dtype=np.uint8), bit_width, count)
    except CorruptFileError as err:
        return "corrupt", err.reason, None
    except NeedsArrow as err:
        return "arrow", str(err), None
    values = [v for v, _ in runs] + packed.tolist()
    if num_marks:
        bad_runs = [v for v, _ in runs if v >= num_marks]
        if bad_runs:
            return "bad index", bad_runs[0], None
        if packed.size and int(packed.max()) >= num_marks:
            return "bad index", int(packed.max()), None
    hits = sum(n for v, n in runs if v == target) + int(np.count_nonzero(packed == target))
    return "ok", sorted(set(values)) if num_marks else [], hits


def compiled_scan(
    data: bytes, bit_width: int, count: int, num_marks: int, target: int
) -> tuple[str, object, object]:
    from parquet_bloom import _kernels
    from parquet_bloom import _pages as pages

    marks = np.zeros(num_marks, dtype=bool)
    status, a, b = _kernels.rle_scan(np.frombuffer(data, np.uint8), bit_width, count, marks, target)
    if status == 0:
        assert a == np.count_nonzero(marks)  # newly marked: all of them, from none
        return "ok", np.flatnonzero(marks).tolist(), b
    if status == 4:
        return "arrow", str(pages._cut_short(a, bit_width, b)), None
    if status == 5:
        return "bad index", a, None
    reason = {
        1: lambda: pages._short_stream(a, count).reason,
        2: lambda: pages._LONG_RUN_HEADER,
        3: lambda: pages._too_wide(a, bit_width),
    }[status]()
    return "corrupt", reason, None


@settings(max_examples=300, deadline=None)
@given(hybrid_streams(), st.data())
def test_the_compiled_scan_marks_and_counts_what_rle_hybrid_decodes(
    stream: tuple[int, list[RleRun | PackedRun]], data: st.DataObject
) -> None:
    # One pass in C instead of rle_hybrid's runs and numpy's unpacking: the same entries
    # referred to (marks of any size, values past them reported as _refer reports them) and
    # the same count of values at the maximum level, or the same error, on streams whole or
    # cut short, and on any bytes.
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    bit_width, runs = stream
    encoded = encode_hybrid(runs, bit_width)
    count = data.draw(st.integers(0, total_values(runs) + 3))
    cut = data.draw(st.integers(0, len(encoded)))
    num_marks = data.draw(st.sampled_from([0, 1, 7, 1 << min(bit_width, 12)]))
    target = data.draw(st.integers(-1, 4))
    for stream_bytes in (encoded, encoded[:cut], data.draw(st.binary(max_size=64))):
        for width in (bit_width, data.draw(st.integers(0, 32))):
            args = (stream_bytes, width, count, num_marks, target)
            assert compiled_scan(*args) == scan_reference(*args), args


def test_the_compiled_scan_refuses_impossible_widths_and_counts() -> None:
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    from parquet_bloom import _kernels

    marks = np.zeros(4, dtype=bool)
    for width, count in ((33, 1), (-1, 1), (3, -1)):
        with pytest.raises(ValueError, match="bit width"):
            _kernels.rle_scan(b"\x02\x01", width, count, marks, 0)
    with pytest.raises(TypeError):
        _kernels.rle_scan(b"\x02\x01", 3, 1, b"read-only", 0)


# -- damaged pages --------------------------------------------------------------------------------

DAMAGED_VARIANTS = {
    "v1-snappy": {"compression": "snappy"},
    "v1-uncompressed": {"compression": "none"},
    "v2-snappy": {"compression": "snappy", "data_page_version": "2.0"},
    "v2-uncompressed-plain": {
        "compression": "none",
        "data_page_version": "2.0",
        "use_dictionary": False,
    },
}
# Ways to damage one byte: every bit flipped (a varint's continuation bit among them), zeroed.
DAMAGES = (lambda b: b ^ 0xFF, lambda b: 0)


def outcome(file: IO[bytes], chunk: Chunk, meta: Any) -> tuple[str, np.ndarray | None]:
    """``chunk_hashes`` on possibly damaged pages: ("hashes", the hashes), ("corrupt", None) or
    ("needs arrow", None); any other exception, or a corrupt file error without an offset in
    the chunk, fails the test."""
    try:
        hashes = chunk_hashes(file, meta, chunk.leaf)
    except CorruptFileError as err:
        assert err.offset is not None, err
        assert chunk.start <= err.offset <= chunk.end, err
        return "corrupt", None
    except NeedsArrow:
        return "needs arrow", None
    assert hashes.dtype == np.uint64
    assert hashes.ndim == 1
    return "hashes", hashes


@pytest.mark.parametrize("variant", DAMAGED_VARIANTS)
def test_a_chunk_cut_short_anywhere_is_corrupt(tmp_path: Path, variant: str) -> None:
    path = write_small(tmp_path / "small.parquet", **DAMAGED_VARIANTS[variant])
    with open(path, "rb") as file:
        for chunk in chunks_of(path):
            assert len(page_headers(path.read_bytes(), chunk)) >= 3
            kind, hashes = outcome(file, chunk, chunk.meta)
            assert kind == "hashes" and hashes is not None
            assert same_hashes(hashes, reference_hashes(chunk))
            for size in range(chunk.meta.total_compressed_size):
                cut = copy.copy(chunk.meta)
                cut.total_compressed_size = size
                assert outcome(file, chunk, cut)[0] == "corrupt", size


def page_of(body: bytes, **header: Any) -> bytes:
    """A hand-made page: its header (the ``PageHeader`` fields given, both sizes the body's)
    and ``body``."""
    return (
        encode_page_header(
            fmt.PageHeader(
                uncompressed_page_size=len(body), compressed_page_size=len(body), **header
            )
        )
        + body
    )


def meta_of_pages(
    meta: Any, pages: bytes, *, codec: int, num_values: int, dictionary: bytes = b""
) -> Any:
    """A copy of a chunk's ``meta`` for hand-made ``pages`` written after the 4-byte magic,
    the first of them the ``dictionary`` page (header and body; none when empty)."""
    meta = copy.copy(meta)
    meta.codec = codec
    meta.num_values = num_values
    meta.dictionary_page_offset = 4 if dictionary else None
    meta.data_page_offset = 4 + len(dictionary)
    meta.total_compressed_size = meta.total_uncompressed_size = len(pages)
    return meta


def test_indices_into_an_empty_dictionary_are_corrupt(tmp_path: Path) -> None:
    # An empty dictionary page, then a page of one index into it: no value to hash, and no
    # way to tell which was meant. (A dictionary of no entries must not count as one whose
    # entries were all seen, which would skip the page unread.)
    chunk = chunk_named(write_small(tmp_path / "small.parquet"), "i")
    first = page_of(
        b"",
        type=fmt.PageType.DICTIONARY_PAGE,
        dictionary_page_header=tt.DictionaryPageHeader(num_values=0, encoding=fmt.Encoding.PLAIN),
    )
    pages = first + page_of(
        bytes([1, 2, 0]),  # index bit width 1, an RLE run of one 0
        type=fmt.PageType.DATA_PAGE,
        data_page_header=tt.DataPageHeader(
            num_values=1,
            encoding=fmt.Encoding.RLE_DICTIONARY,
            definition_level_encoding=fmt.Encoding.RLE,
            repetition_level_encoding=fmt.Encoding.RLE,
        ),
    )
    meta = meta_of_pages(
        chunk.meta, pages, codec=fmt.CompressionCodec.UNCOMPRESSED, num_values=1, dictionary=first
    )
    leaf = dataclasses.replace(chunk.leaf, max_definition_level=0)
    with pytest.raises(CorruptFileError, match="index"):
        chunk_hashes(io.BytesIO(b"PAR1" + pages), meta, leaf)


@pytest.mark.parametrize("codec", ["SNAPPY", "GZIP", "ZSTD", "BROTLI", "LZ4_RAW"])
def test_a_v2_page_of_nulls_without_value_bytes_is_read(tmp_path: Path, codec: str) -> None:
    # A data page v2 of nulls only, whose values take no bytes at all (parquet-java and Spark
    # write them so, compressed or not): nothing to decompress, no value to hash.
    chunk = chunk_named(write_small(tmp_path / "small.parquet"), "i")
    levels = bytes([3 << 1, 0])  # an RLE run of three definition levels 0
    pages = page_of(
        levels,
        type=fmt.PageType.DATA_PAGE_V2,
        data_page_header_v2=tt.DataPageHeaderV2(
            num_values=3,
            num_nulls=3,
            num_rows=3,
            encoding=fmt.Encoding.PLAIN,
            definition_levels_byte_length=len(levels),
            repetition_levels_byte_length=0,
            is_compressed=True,
        ),
    )
    meta = meta_of_pages(
        chunk.meta, pages, codec=getattr(fmt.CompressionCodec, codec), num_values=3
    )
    leaf = dataclasses.replace(chunk.leaf, max_definition_level=1, max_repetition_level=0)
    hashes = chunk_hashes(io.BytesIO(b"PAR1" + pages), meta, leaf)
    assert hashes.size == 0


@pytest.mark.parametrize("variant", DAMAGED_VARIANTS)
def test_overwritten_page_bytes_decode_or_are_corrupt(tmp_path: Path, variant: str) -> None:
    # Each byte of each chunk overwritten in turn: the pages are corrupt, or give the true
    # chunk's hashes (the byte did not matter: statistics, say), or give the hashes pyarrow
    # reads from the same damaged bytes (a value changed, which no reader can tell without a
    # checksum). Never hashes of other values than pyarrow's: values silently lost or made up.
    path = write_small(tmp_path / "small.parquet", **DAMAGED_VARIANTS[variant])
    damaged = tmp_path / "damaged.parquet"
    original = path.read_bytes()
    damaged.write_bytes(original)
    seen: collections.Counter[str] = collections.Counter()
    unseen = set()
    with open(damaged, "r+b") as file:
        for chunk in chunks_of(path):
            truth = reference_hashes(chunk)
            on_damaged = Chunk(damaged, chunk.row_group, chunk.leaf, chunk.meta)
            for pos in range(chunk.start, chunk.end):
                for damage in DAMAGES:
                    byte = damage(original[pos])
                    file.seek(pos)
                    file.write(bytes([byte]))
                    file.flush()
                    kind, hashes = outcome(file, chunk, chunk.meta)
                    if hashes is not None and not same_hashes(hashes, truth):
                        where = (chunk.row_group, chunk.leaf.path, pos - chunk.start, byte)
                        try:
                            as_read = reference_hashes(on_damaged)
                        except (OSError, pa.ArrowException):
                            kind = "unseen"
                            unseen.add(where)
                        else:
                            assert same_hashes(hashes, as_read), where
                            kind = "values changed"
                    seen[kind] += 1
                file.seek(pos)
                file.write(original[pos : pos + 1])
    # Overwrites pyarrow refuses must not be read as other values. Those once were: a dictionary
    # page header's num_values zeroed (no hash came out), a DataPageHeaderV2's
    # definition_levels_byte_length zeroed (levels read as values), a definition-level run
    # header made a bit-packed run longer than its stream (only its first levels read).
    assert unseen == set()
    # The damage was seen, and some of it changed values, some did not matter.
    assert seen["corrupt"] > 500 and seen["values changed"] > 300 and seen["hashes"] > 500, seen


# -- page headers longer than the first read, pages larger than MAX_PAGE_SIZE ------------------


def decode_page_header(data: bytes) -> tuple[Any, int]:
    """The whole PageHeader (format.parse_page_header leaves out its statistics) and its size."""
    transport = TMemoryBuffer(data)
    header = fmt.PageHeader()
    header.read(TCompactProtocol(transport))
    return header, transport.cstringio_buf.tell()


def encode_page_header(header: Any) -> bytes:
    transport = TMemoryBuffer()
    header.write(TCompactProtocol(transport))
    return bytes(transport.getvalue())


def rewrite_page_headers(
    src: Path,
    dst: Path,
    change: Callable[[Any], None],
    body: Callable[[bytes], bytes] = bytes,
) -> Chunk:
    """``src`` (one chunk of data pages, nothing between it and the footer) with each page
    header passed to ``change`` and re-encoded, each page's body passed through ``body``, and
    the footer's sizes made to match."""
    data = src.read_bytes()
    md = footer_of(data)
    (row_group,) = md.row_groups
    (column,) = row_group.columns
    meta = column.meta_data
    assert meta.dictionary_page_offset is None
    assert column.offset_index_offset is None and meta.bloom_filter_offset is None
    start, end = meta.data_page_offset, meta.data_page_offset + meta.total_compressed_size
    out = bytearray(data[:start])
    pos = start
    while pos < end:
        header, size = decode_page_header(data[pos:end])
        old_body = data[pos + size : pos + size + header.compressed_page_size]
        change(header)
        out += encode_page_header(header) + body(old_body)
        pos += size + len(old_body)
    growth = len(out) - end
    meta.total_compressed_size += growth
    meta.total_uncompressed_size += growth
    row_group.total_byte_size += growth
    if row_group.total_compressed_size is not None:
        row_group.total_compressed_size += growth
    footer = fmt.encode_file_metadata(md)
    dst.write_bytes(bytes(out) + footer + len(footer).to_bytes(4, "little") + fmt.MAGIC)
    (chunk,) = chunks_of(dst)
    return chunk


@pytest.mark.parametrize("physical", ["int64", "string"])
def test_bytes_after_a_pages_values_go_to_pyarrow(tmp_path: Path, physical: str) -> None:
    # pyarrow, parquet-java and arrow-rs ignore bytes after a page's last value; they may be
    # a writer's padding or damage, so the page goes to pyarrow, which reads it or refuses it.
    values = list(range(10)) if physical == "int64" else [f"v{i}" for i in range(10)]
    src = tmp_path / "src.parquet"
    pq.write_table(
        pa.table({"x": values}),
        src,
        compression="none",
        use_dictionary=False,
        write_statistics=False,
        data_page_version="1.0",
    )

    def grow(header: Any) -> None:
        header.compressed_page_size += 8
        header.uncompressed_page_size += 8

    chunk = rewrite_page_headers(src, tmp_path / "padded.parquet", grow, lambda b: b + bytes(8))
    assert pq.read_table(chunk.path).column("x").to_pylist() == values
    with open(chunk.path, "rb") as file, pytest.raises(NeedsArrow, match="of the page's values"):
        chunk_hashes(file, chunk.meta, chunk.leaf)
    dst = tmp_path / "dst.parquet"
    rewrite_bloom_filters(chunk.path, dst, columns=["x"])
    assert_bloom_filters_valid(dst)


def test_a_bit_packed_run_cut_short_of_its_groups_goes_to_pyarrow() -> None:
    # 10 values of 4 bits in a run of 2 groups: 8 bytes, of which only the 5 that hold the
    # values are there (old Polars writers cut the last group so). Not corrupt: pyarrow reads it.
    header = (2 << 1) | 1
    values = bytes([0x21, 0x43, 0x65, 0x87, 0xA9])
    with pytest.raises(NeedsArrow, match="2 groups of 4-bit values with 5 bytes left"):
        rle_hybrid(np.frombuffer(bytes([header]) + values, dtype=np.uint8), 4, 10)
    packed, runs = rle_hybrid(np.frombuffer(bytes([header]) + values + bytes(3), np.uint8), 4, 10)
    assert packed.tolist() == list(range(1, 11)) and runs == []


@pytest.mark.parametrize("data_page_version", ["1.0", "2.0"])
@pytest.mark.parametrize("value_length", [12_000, 40_000])
def test_a_page_header_longer_than_the_first_read(
    tmp_path: Path, value_length: int, data_page_version: str
) -> None:
    # Arrow C++ leaves out statistics over 4,096 bytes a value (max_statistics_size, which
    # pyarrow does not expose), so its headers stay under 9 KB; a writer without that limit
    # puts the page's min and max in full. Done here to pyarrow's pages: the statistics of
    # 12 KB (one re-read) and 40 KB strings (two).
    values = [chr(ord("a") + i) * value_length + str(i) for i in range(6)]
    src = tmp_path / "long-strings.parquet"
    pq.write_table(
        pa.table({"s": values}),
        src,
        use_dictionary=False,
        write_statistics=True,
        write_page_index=False,
        data_page_version=data_page_version,
    )
    encoded = sorted(v.encode() for v in values)

    def with_full_statistics(header: Any) -> None:
        sub = header.data_page_header or header.data_page_header_v2
        sub.statistics = Statistics(min_value=encoded[0], max_value=encoded[-1], null_count=0)

    chunk = rewrite_page_headers(src, tmp_path / "long-header.parquet", with_full_statistics)
    _, header_size = fmt.parse_page_header(chunk.path.read_bytes()[chunk.start :])
    assert header_size > (PAGE_HEADER_GUESS if value_length < 16_000 else 4 * PAGE_HEADER_GUESS)
    assert pq.read_table(chunk.path).column("s").to_pylist() == values
    assert same_hashes(read_hashes(chunk), reference_hashes(chunk))


def test_a_page_claiming_more_than_max_page_size_needs_arrow(tmp_path: Path) -> None:
    src = tmp_path / "small.parquet"
    pq.write_table(pa.table({"x": np.arange(1_000)}), src, use_dictionary=False)

    def huge(header: Any) -> None:
        header.uncompressed_page_size = MAX_PAGE_SIZE + 1

    chunk = rewrite_page_headers(src, tmp_path / "huge.parquet", huge)
    with pytest.raises(NeedsArrow):
        read_hashes(chunk)


# -- a page whose index stream costs memory for values it does not store -----------------------


def test_zero_width_dictionary_indices_cost_no_memory_per_value(tmp_path: Path) -> None:
    # A one-entry dictionary needs 0-bit indices, and 0-bit values take no bytes: one
    # bit-packed run header says "2**33 groups of zeros". The page, and the chunk's footer
    # entry, claim 2**22 values; the values themselves are one entry, hashed once.
    src = tmp_path / "one-value.parquet"
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    pq.write_table(pa.table({"x": [7] * 100}, schema=schema), src, compression="none")
    (chunk,) = chunks_of(src)
    data = src.read_bytes()
    claimed = 1 << 22
    dictionary_header, size = decode_page_header(data[chunk.start :])
    dictionary_end = chunk.start + size + dictionary_header.compressed_page_size
    dictionary_page = data[chunk.start : dictionary_end]
    data_header, _ = decode_page_header(data[dictionary_end:])
    indices = bytes([0]) + uleb128((1 << 33) << 1 | 1)  # bit width 0, one bit-packed run
    data_header.data_page_header.num_values = claimed
    data_header.compressed_page_size = data_header.uncompressed_page_size = len(indices)
    data_page = encode_page_header(data_header) + indices
    path = tmp_path / "zero-width.parquet"
    path.write_bytes(fmt.MAGIC + dictionary_page + data_page)
    meta = copy.copy(chunk.meta)
    meta.dictionary_page_offset = len(fmt.MAGIC)
    meta.data_page_offset = len(fmt.MAGIC) + len(dictionary_page)
    meta.total_compressed_size = len(dictionary_page) + len(data_page)
    meta.num_values = claimed
    out = np.empty(claimed, dtype=np.uint64)  # room for the hashes, allocated beforehand
    tracemalloc.start()
    try:
        with open(path, "rb") as file:
            ours = chunk_hashes(file, meta, chunk.leaf, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert same_hashes(ours, column_hashes(pa.array([7]), chunk.leaf))
    assert peak < (1 << 20), f"{peak} bytes allocated for a {len(data_page)}-byte page"


def test_the_hashes_of_unused_dictionary_entries_are_dropped_in_place() -> None:
    # The dictionary's hashes come first; once the pages have said which entries they use,
    # the others go and the hashes of the pages' own values (PLAIN ones) move down after them.
    buffer = HashBuffer(4)  # room grows past the footer's count
    buffer.add(np.arange(10, 16, dtype=np.uint64))  # six dictionary entries
    buffer.add(np.array([100, 101, 102], dtype=np.uint64))  # PLAIN values after a fallback
    buffer.keep_of_first(6, np.array([1, 4]))
    assert buffer.hashes().tolist() == [11, 14, 100, 101, 102]
    buffer.keep_of_first(2, np.array([], dtype=np.int64))  # no entry used: all go
    assert buffer.hashes().tolist() == [100, 101, 102]
