"""Damaged parts: flipped bytes and truncations of index files, marks, the packed archive and
checksums.txt give located, typed errors (a :class:`BloomFilterError` naming the file, and the
offset where a block or structure is damaged); nothing hangs, nothing else escapes."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquet_bloom import clickhouse as pbch
from parquet_bloom._clickhouse import blocks, files
from parquet_bloom._clickhouse.cityhash import city_hash128
from parquet_bloom.errors import BloomFilterError, CorruptFileError
from tests.clickhouse.conftest import ClickHouse


def copy_part(ch: ClickHouse, table: str, tmp_path: Path, which: int = 0) -> tuple[Path, str]:
    t = ch.tables[table]
    target = tmp_path / t.parts[which]
    shutil.copytree(t.data_dir / t.parts[which], target)
    return target, t.sql


def none_block(payload: bytes) -> bytes:
    """A block of method NONE around ``payload``, with its checksum."""
    body = struct.pack("<BII", 0x02, len(payload) + 9, len(payload)) + payload
    low, high = city_hash128(body)
    return struct.pack("<QQ", low, high) + body


def varuint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def reseal(part: Path, name: str) -> None:
    """Rewrite checksums.txt so that it agrees with ``name``'s current bytes: damage that only
    the deeper checks (block checksums, marks, granule layout) can see."""
    raw = (part / "checksums.txt").read_bytes()
    entries = files.parse_checksums(raw)
    data = (part / name).read_bytes()
    out = bytearray(varuint(len(entries)))
    for e in entries.values():
        size, h = (
            (len(data), files.file_hash(data)) if e.name == name else (e.file_size, e.file_hash)
        )
        out += varuint(len(e.name.encode())) + e.name.encode() + varuint(size)
        out += struct.pack("<QQ", *h) + bytes([e.is_compressed])
        if e.is_compressed:
            assert e.uncompressed_size is not None and e.uncompressed_hash is not None
            out += varuint(e.uncompressed_size) + struct.pack("<QQ", *e.uncompressed_hash)
    (part / "checksums.txt").write_bytes(b"checksums format version: 4\n" + none_block(bytes(out)))


def located(err: BloomFilterError, name: str) -> bool:
    """Whether ``err`` names the damaged file, or (marks and index disagreeing) its partner."""
    stem = name.rsplit(".", 1)[0]
    return err.source is not None and (
        err.source.endswith(name) or err.source.rsplit("/", 1)[-1].rsplit(".", 1)[0] == stem
    )


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def test_reseal_keeps_a_part_readable(clickhouse: ClickHouse, tmp_path: Path) -> None:
    part, sql = copy_part(clickhouse, "chained", tmp_path)
    before = pbch.open_part(part, sql).indexes["bf_s"].filters[0][0].to_bytes()
    reseal(part, "skp_idx_bf_s.idx")
    assert pbch.open_part(part, sql).indexes["bf_s"].filters[0][0].to_bytes() == before


@pytest.mark.parametrize(
    ("table", "name"),
    [
        ("chained", "skp_idx_bf_s.idx"),  # stand-alone index, NONE+LZ4 blocks
        ("chained", "skp_idx_tk_s.cmrk2"),  # compressed marks
        ("typed_compact", "skp_idx_ng_s.mrk4"),  # plain marks of a compact part
        ("typed_compact", "skp_idx_bf_arr.idx"),  # ZSTD blocks
        ("plain", "skp_idx.packed"),  # the archive
        ("typed_wide", "checksums.txt"),
    ],
)
def test_flipped_bytes_are_located(
    clickhouse: ClickHouse, tmp_path: Path, table: str, name: str
) -> None:
    part, sql = copy_part(clickhouse, table, tmp_path)
    size = (part / name).stat().st_size
    for offset in sorted({0, 1, 16, 17, 20, 25, size // 3, size // 2, size - 1}):
        shutil.copyfile(clickhouse.tables[table].data_dir / part.name / name, part / name)
        flip(part / name, offset)
        with pytest.raises(CorruptFileError) as info:
            pbch.open_part(part, sql)
        assert info.value.source is not None and info.value.source.endswith(
            name if name != "checksums.txt" else "checksums.txt"
        )


@pytest.mark.parametrize(
    ("table", "name"),
    [
        ("chained", "skp_idx_bf_s.idx"),
        ("chained", "skp_idx_tk_s.cmrk2"),
        ("typed_compact", "skp_idx_ng_s.mrk4"),
        ("typed_compact", "skp_idx_tk_s.idx"),
        ("plain", "skp_idx.packed"),
    ],
)
def test_damage_behind_a_resealed_checksums_txt(
    clickhouse: ClickHouse, tmp_path: Path, table: str, name: str
) -> None:
    """checksums.txt made to agree with the damage: the blocks' own checksums, the marks and the
    granule layout still catch it, located."""
    part, sql = copy_part(clickhouse, table, tmp_path)
    original = (part / name).read_bytes()
    size = len(original)
    for offset in sorted({0, 16, 18, 22, size // 2, size - 1}):
        (part / name).write_bytes(original)
        flip(part / name, offset)
        reseal(part, name)
        try:
            pbch.open_part(part, sql)
        except BloomFilterError as err:
            assert located(err, name)
        else:  # a flip in a mark's third field or a plain marks' padding changes no decision
            assert name.endswith(".mrk4") and offset % 24 >= 16
    for cut in sorted({0, 1, 24, size // 2, size - 1}):
        (part / name).write_bytes(original[:cut])
        reseal(part, name)
        with pytest.raises(BloomFilterError) as info:
            pbch.open_part(part, sql)
        assert located(info.value, name)


def test_a_damaged_block_names_its_offset(clickhouse: ClickHouse, tmp_path: Path) -> None:
    part, sql = copy_part(clickhouse, "chained", tmp_path)
    data = (part / "skp_idx_bf_s.idx").read_bytes()
    _, found = blocks.decompress_stream(data, "x")
    assert len(found) >= 1
    last = found[-1].offset
    flip(part / "skp_idx_bf_s.idx", last + 30)
    with pytest.raises(CorruptFileError) as info:
        pbch.open_part(part, sql)
    assert info.value.offset == last
    assert "checksum" in str(info.value)


@pytest.mark.parametrize("table", ["chained", "typed_compact", "plain"])
def test_truncated_files_are_located(clickhouse: ClickHouse, tmp_path: Path, table: str) -> None:
    part, sql = copy_part(clickhouse, table, tmp_path)
    read = {f"skp_idx_{pbch.escape_for_file_name(n)}" for n in pbch.open_part(part, sql).indexes}
    for f in sorted(part.iterdir()):
        stem = f.name.rsplit(".", 1)[0]
        if not (stem in read or f.name in ("skp_idx.packed", "checksums.txt")):
            continue  # a file of an index not read here (minmax, an expression)
        original = f.read_bytes()
        for cut in sorted({0, 1, len(original) // 2, len(original) - 1}):
            f.write_bytes(original[:cut])
            with pytest.raises(BloomFilterError) as info:
                pbch.open_part(part, sql)
            assert info.value.source is not None and info.value.source.endswith(f.name)
        f.write_bytes(original)


# -- the sans-IO parsers on arbitrary damage ---------------------------------------------------


@pytest.fixture(scope="module")
def samples(clickhouse: ClickHouse) -> dict[str, bytes]:
    t = clickhouse.tables["chained"]
    p = clickhouse.tables["plain"]
    part = t.data_dir / t.parts[0]
    return {
        "idx": (part / "skp_idx_ng_s.idx").read_bytes(),
        "marks": (part / "skp_idx_ng_s.cmrk2").read_bytes(),
        "checksums": (part / "checksums.txt").read_bytes(),
        "packed": (p.data_dir / p.parts[0] / "skp_idx.packed").read_bytes(),
    }


def parse(kind: str, data: bytes) -> None:
    if kind == "idx":
        blocks.decompress_stream(data, "f")
    elif kind == "marks":
        files.parse_marks(data, "f", compressed=True, width=3)
    elif kind == "checksums":
        files.parse_checksums(data, "f")
    else:
        files.parse_packed(data, "f")


@pytest.mark.parametrize("kind", ["idx", "marks", "checksums", "packed"])
def test_every_truncation(samples: dict[str, bytes], kind: str) -> None:
    data = samples[kind]
    parse(kind, data)
    for cut in range(len(data)):
        try:
            parse(kind, data[:cut])
        except BloomFilterError as err:
            assert err.source == "f"
        else:  # a whole number of blocks, or an archive's table of contents cut after a member
            assert kind in ("idx", "marks", "packed")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("kind", ["idx", "marks", "checksums", "packed"])
def test_random_damage(samples: dict[str, bytes], kind: str, data: st.DataObject) -> None:
    raw = bytearray(samples[kind])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    try:
        parse(kind, bytes(raw))
    except BloomFilterError as err:
        assert err.source == "f"


def test_huge_lengths_do_not_allocate() -> None:
    """Sizes in headers past the limits are refused before anything is allocated."""
    body = struct.pack("<BII", 0x02, 0xFFFFFFF0, 0xFFFFFFF0)
    low, high = city_hash128(body)
    with pytest.raises(CorruptFileError, match="out of range"):
        blocks.decompress_stream(struct.pack("<QQ", low, high) + body, "f")
    with pytest.raises(CorruptFileError):
        files.parse_packed(struct.pack("<BQ", 1, 1 << 60), "f")
    with pytest.raises(CorruptFileError):
        files.parse_checksums(b"checksums format version: 4\n" + none_block(varuint(1 << 40)), "f")
