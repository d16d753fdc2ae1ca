"""Our Paimon bloom-filter indexes against Java Paimon 0.9's own (conftest.PaimonOracle): for
every type Paimon indexes, the bytes its BloomFilterFileIndex writes equal ours, and its reader
and ours answer alike for every value; its sizing equals ours; its DataFileIndexWriter's
containers (column order, embedded or not) equal ours."""

from __future__ import annotations

import datetime as dt
import math
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from parquet_bloom import paimon
from parquet_bloom.paimon import BloomFilter64, build_bloom_filter, build_file_index, filter_size
from tests.paimon.conftest import Case, PaimonOracle

N = 120  # values written per case; as many more are probed that were not written


def _strings(rng: random.Random, n: int, max_len: int) -> list[str]:
    pools = [
        "abcdefghij",
        "äöüßéèçñ",
        "\u4e2d\u6587\u65e5\u672c\uac00",
        "\U0001f600\U0001f680\U00010348",  # beyond the BMP: surrogate pairs in Java
        "\x00\x01\x7f",
        "\ud800\udc00\udfff\ud83d",  # surrogates, lone and paired, as a Java string holds them
    ]
    out = []
    for _ in range(n):
        pool = rng.choice(pools)
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(0, max_len))))
    return out


def _values(data_type: str, rng: random.Random, n: int) -> list[Any]:
    """Distinct values of a type, edge cases first."""
    root = paimon.parse_type(data_type).root
    nprng = np.random.default_rng(rng.randrange(2**32))
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        bits = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}[root]
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        pool = [low, high, 0, -1, 1] + [rng.randint(low, high) for _ in range(3 * n)]
    elif root == "FLOAT":
        special = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, 3.4028234663852886e38, 0.1]
        pool = special + [float(x) for x in nprng.standard_normal(3 * n).astype(np.float32) * 1e3]
    elif root == "DOUBLE":
        special = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308, 0.1]
        pool = special + [float(x) for x in nprng.standard_normal(3 * n) * 1e6]
    elif root == "DATE":
        pool = [dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31)]
        pool += [
            dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 30000))
            for _ in range(3 * n)
        ]
    elif root == "TIME":
        pool = [dt.time(0), dt.time(23, 59, 59, 999999)]
        pool += [
            dt.time(
                rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999999)
            )
            for _ in range(3 * n)
        ]
    elif root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        nanos = [0, -1, 1, 999_999, -1_000_001] + [
            rng.randint(-(2**62), 2**62) for _ in range(3 * n)
        ]
        pool = [np.datetime64(x, "ns") for x in nanos]
    elif root in ("CHAR", "VARCHAR"):
        pool = _strings(rng, 3 * n, 12)
    else:
        pool = [b"", b"\x00", b"\xff" * 7] + [
            rng.randbytes(rng.randint(0, 16)) for _ in range(3 * n)
        ]
    seen, out = set(), []
    for v in pool:
        key = repr(v) if not isinstance(v, float) else struct_key(v, root)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out[:n]


def struct_key(v: float, root: str) -> str:
    return "nan" if math.isnan(v) else (repr(np.float32(v)) if root == "FLOAT" else repr(v))


TYPES = [
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT NOT NULL",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "TIME",
    "TIME(3)",
    "TIMESTAMP(0)",
    "TIMESTAMP(3)",
    "TIMESTAMP(6)",
    "TIMESTAMP(9)",
    "TIMESTAMP(3) WITH LOCAL TIME ZONE",
    "TIMESTAMP_LTZ(6)",
    "CHAR(12)",
    "VARCHAR(40)",
    "STRING",
    "BINARY(16)",
    "VARBINARY(20)",
    "BYTES",
]
SIZINGS = [(N, 0.01), (40, 0.3)]  # the second one small: false positives to agree on


@pytest.fixture(scope="module")
def cases(paimon_java: PaimonOracle) -> list[Case]:
    rng = random.Random(20)
    made = []
    for data_type in TYPES:
        for items, fpp in SIZINGS:
            values = _values(data_type, rng, 2 * N)
            written, others = values[:N], values[N:]
            written = [*written[: N // 2], None, *written[N // 2 :]]  # nulls are skipped
            made.append(Case(data_type, items, fpp, written, [*written, *others, None]))
    paimon_java.bloom(made)
    return made


@pytest.mark.parametrize("data_type", TYPES)
def test_every_type_builds_the_bytes_paimon_writes(cases: list[Case], data_type: str) -> None:
    for case in (c for c in cases if c.data_type == data_type):
        ours = build_bloom_filter(case.values, data_type, case.items, case.fpp)
        assert ours.to_bytes() == case.written


@pytest.mark.parametrize("data_type", TYPES)
def test_every_type_answers_as_paimons_reader(cases: list[Case], data_type: str) -> None:
    for case in (c for c in cases if c.data_type == data_type):
        read = BloomFilter64.from_bytes(case.written, data_type)
        assert read.might_contain_many(case.probes).tolist() == case.answers
        assert [read.might_contain(v) for v in case.probes] == case.answers
        # Written values are all found; the small filter answers yes for some others too.
        assert all(case.answers[: len(case.values)])
        assert case.answers[-1]  # a null literal keeps the file


def _as_numpy(values: list[Any], data_type: str) -> np.ndarray | None:
    root = paimon.parse_type(data_type).root
    present = [v for v in values if v is not None]
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return np.array(present, dtype=np.int64)
    if root in ("FLOAT", "DOUBLE"):
        return np.array(present, dtype=np.float64)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return np.array(present, dtype="datetime64[ns]")
    if root == "DATE":
        return np.array(present, dtype="datetime64[D]")
    return None  # numpy's bytes_ drop trailing NULs; strings go through Python


def _as_arrow(values: list[Any], data_type: str) -> pa.Array:
    root = paimon.parse_type(data_type).root
    if root == "FLOAT":
        return pa.array(values, type=pa.float32())
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return pa.array(
            [None if v is None else int(v.astype(np.int64)) for v in values], pa.int64()
        ).cast(pa.timestamp("ns"))
    if root == "TIME":
        return pa.array(values, type=pa.time64("us"))
    if root in ("CHAR", "VARCHAR"):
        # Arrow strings are UTF-8: lone surrogates have no place in them.
        return pa.array(
            [
                None if v is None else v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                for v in values
            ]
        )
    return pa.array(values)


@pytest.mark.parametrize("data_type", TYPES)
def test_numpy_and_arrow_values_build_the_same_bytes(cases: list[Case], data_type: str) -> None:
    for case in (c for c in cases if c.data_type == data_type):
        arrow = _as_arrow(list(case.values), data_type)
        from_arrow = build_bloom_filter(arrow, data_type, case.items, case.fpp)
        python = build_bloom_filter(arrow.to_pylist(), data_type, case.items, case.fpp)
        assert from_arrow == python
        if paimon.parse_type(data_type).kind != "string":
            assert from_arrow.to_bytes() == case.written
        array = _as_numpy(list(case.values), data_type)
        if array is not None:
            assert (
                build_bloom_filter(array, data_type, case.items, case.fpp).to_bytes()
                == case.written
            )


def test_sizing_equals_paimons(paimon_java: PaimonOracle) -> None:
    rng = random.Random(7)
    pairs = [
        (1_000_000, 0.1),
        (1, 0.5),
        (1, 5e-324),
        (7, 0.999999),
        (2**31 - 1, 0.99),
        (10**9, 0.01),
    ]
    pairs += [(2**31 - 1, 0.1), (300_000_000, 1e-3)]  # too many bits for a Java array
    for _ in range(400):
        items = int(10 ** rng.uniform(0, 8.5))
        fpp = 10 ** rng.uniform(-15, -0.01)
        pairs.append((items, fpp))
    java = paimon_java.sizes(pairs)
    failing = 0
    for (items, fpp), expected in zip(pairs, java, strict=True):
        if isinstance(expected, str):
            failing += 1
            with pytest.raises(ValueError, match="Java int"):
                filter_size(items, fpp)
        else:
            assert tuple(filter_size(items, fpp)) == expected, (items, fpp)
    assert failing >= 2


def _colliding(bucket: int, count: int, capacity: int) -> list[str]:
    """Column names whose String hash falls in one bin of a HashMap of ``capacity``."""
    from parquet_bloom._paimon.container import java_string_hash

    out, i = [], 0
    while len(out) < count:
        name = f"c{i}"
        h = java_string_hash(name)
        if ((h ^ (h >> 16)) & (capacity - 1)) == bucket:
            out.append(name)
        i += 1
    return out


def test_containers_equal_paimons_data_file_index_writer(paimon_java: PaimonOracle) -> None:
    """Whole containers as DataFileIndexWriter writes them for a data file: its column order
    (Java HashMaps: resized past 12 columns, and when 9 names share a bin), names in modified
    UTF-8, and whether they go in the manifest (500 bytes) or a file."""
    rng = random.Random(3)
    name_sets = [
        ["id", "name"],
        ["a", "b", "c", "d", "e"],
        [f"col_{i}" for i in range(13)],  # past 3/4 of 16: the table doubles
        [f"x{rng.randrange(10**6)}" for _ in range(30)],
        [*_colliding(5, 9, 16), "other"],  # 9 in one bin of 16: doubled instead of a tree
        _colliding(3, 4, 16)[::-1] + _colliding(3, 2, 16),
        ["\u00e9t\u00e9", "\U0001f600", "nul\x00l", "\u4e2d"],
    ]
    specs, expected_inputs = [], []
    for names in name_sets:
        names = list(dict.fromkeys(names))
        types = [rng.choice(["INT", "STRING", "BIGINT", "DOUBLE"]) for _ in names]
        columns = list(zip(names, types, strict=True))
        items = {n: rng.choice([5, 20, 300]) for n in names}
        options = {"file-index.bloom-filter.columns": ",".join(names)}
        options |= {f"file-index.bloom-filter.{n}.items": str(items[n]) for n in names}
        options |= {f"file-index.bloom-filter.{n}.fpp": "0.05" for n in names}
        rows = []
        for r in range(25):
            row: list[Any] = []
            for t in types:
                if r % 7 == 3:
                    row.append(None)
                elif t == "STRING":
                    row.append(f"v{rng.randrange(50)}")
                elif t == "DOUBLE":
                    row.append(rng.random())
                else:
                    row.append(rng.randrange(-1000, 1000))
            rows.append(row)
        specs.append((columns, options, rows))
        expected_inputs.append((names, types, items, rows))
    java = paimon_java.containers(specs)
    for (names, types, items, rows), (kind, data) in zip(expected_inputs, java, strict=True):
        values = {n: [row[i] for row in rows] for i, n in enumerate(names)}
        ours = build_file_index(
            values, dict(zip(names, types, strict=True)), items=items, fpp=0.05, order=names
        )
        assert ours == data, names
        assert kind == ("EMBEDDED" if len(data) <= paimon.DEFAULT_IN_MANIFEST_THRESHOLD else "FILE")
        index = paimon.read_file_index(data)
        assert index.columns == paimon.column_order(names)
        for name, typ in zip(names, types, strict=True):
            f = index.bloom_filter(name, typ)
            assert f is not None
            assert f.might_contain_many(values[name]).all()


def test_where_paimons_reader_misreads_a_large_hash_count(paimon_java: PaimonOracle) -> None:
    """Paimon's reader assembles the hash count from signed Java bytes: a count of 128 or more
    whose low byte is 0x80 or more reads as a negative count, and its filter then passes every
    value. Paimon writes such counts for tiny fpps (1 item at 1e-60: 200 hashes). Ours reads
    the count written (no false negatives either way; we skip more)."""
    probes = [1, *range(1000, 1200)]
    case = Case("INT", 1, 1e-60, [1], probes)
    paimon_java.bloom([case])
    ours = build_bloom_filter([1], "INT", 1, 1e-60)
    assert ours.to_bytes() == case.written and ours.num_hashes == 200
    assert all(case.answers)  # Java: every value may be there
    answers = ours.might_contain_many(probes)
    assert answers[0] and not answers[1:].any()
