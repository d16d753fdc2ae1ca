"""Encrypted filters opened where they lie (``_encrypted_reads._open_in_place``): every filter
laid out as writers lay it out is opened there, bit for bit what the reference decryption of
``reference.py`` gives, and what the step-by-step path gives; anything else is declined, for
that path to open or to report, located (the tampering tests of ``test_tampering.py`` go through
both)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom import _encrypted_reads as encrypted_reads
from parquet_bloom import _format as fmt
from parquet_bloom._crypto import cipher
from parquet_bloom.errors import DecryptionError
from tests.encryption import reference
from tests.encryption import test_pyarrow_files as pyarrow_files
from tests.encryption.keys import COLUMN_KEYS, DATA, FOOTER_KEY, InServerWrapKms

BLOOM = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
BLOOM_KEYS = DecryptionKeys(FOOTER_KEY, COLUMN_KEYS)


@pytest.fixture(scope="module", params=["uniform", "columns"])
def rewritten(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file pyarrow encrypts (every column with the footer key, or two with their own keys
    and one in plaintext) with filters on every column, written by our rewrite."""
    tmp = tmp_path_factory.mktemp("in-place")
    raw = pyarrow_files.write(tmp / "raw.parquet", uniform=request.param == "uniform")
    out = tmp / "filtered.parquet"
    pb.rewrite_bloom_filters(raw, out, columns=["a", "b", "c"], fpp=0.01, decryption=kms_keys())
    return out


def kms_keys() -> DecryptionKeys:
    return DecryptionKeys.from_kms(InServerWrapKms(pyarrow_files.MASTER_KEYS))


@pytest.fixture
def checked_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many filters each call of the step-by-step path was given."""
    calls: list[int] = []
    checked = encrypted_reads._load_checked

    def counting(*args: Any) -> None:
        calls.append(len(args[3]))
        checked(*args)

    monkeypatch.setattr(encrypted_reads, "_load_checked", counting)
    yield calls


def reference_filters(path: Path, keys: DecryptionKeys) -> dict[tuple[int, str], bytes]:
    """Every encrypted filter's bitset, decrypted by the reference (its key from the reader,
    its modules found by their length prefixes, their AADs packed by the reference)."""
    data = path.read_bytes()
    out = {}
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        decryptor = reader._decryptor
        assert decryptor is not None
        for chunk in reader.column_chunks:
            if not chunk.encrypted or chunk.bloom_filter_offset is None:
                continue
            rg, col = reader._footer.row_group_ordinal(chunk.row_group), chunk.column_index
            gcm = reader._ciphers[chunk.row_group][1][col]
            assert gcm is not None
            header, at = reference.gcm_module(
                data,
                chunk.bloom_filter_offset,
                gcm.key,
                reference.aad(decryptor.file_aad, 8, rg, col, None),
            )
            assert fmt.parse_bloom_filter_header(header)[1] <= len(header)
            bitset, _ = reference.gcm_module(
                data, at, gcm.key, reference.aad(decryptor.file_aad, 9, rg, col, None)
            )
            out[(chunk.row_group, chunk.path)] = bitset
    return out


def read_filters(
    path: Path, keys: DecryptionKeys
) -> dict[tuple[int, str], pb.SplitBlockBloomFilter]:
    with pb.BloomFilterReader(path, decryption=keys) as reader:
        found, failed = reader.filters_with_errors()
    assert failed == {}
    return found


def test_writers_filters_open_in_place(rewritten: Path, checked_calls: list[int]) -> None:
    """Our rewrite's filters (footer key, column keys): all opened in place, as the reference
    decrypts them; the plaintext column's filters are read as ever."""
    keys = kms_keys()
    expected = reference_filters(rewritten, keys)
    found = read_filters(rewritten, keys)
    assert checked_calls == []
    assert expected and {k: found[k].to_bytes() for k in expected} == expected
    assert len(found) == 9  # three columns, three row groups


def test_parquet_java_filters_open_in_place(checked_calls: list[int]) -> None:
    expected = reference_filters(BLOOM, BLOOM_KEYS)
    found = read_filters(BLOOM, BLOOM_KEYS)
    assert checked_calls == []
    assert len(expected) == 2
    assert {k: found[k].to_bytes() for k in expected} == expected


def test_the_step_by_step_path_reads_the_same(
    rewritten: Path, monkeypatch: pytest.MonkeyPatch, checked_calls: list[int]
) -> None:
    """Every filter declined in place: the step-by-step path opens them all, the same."""
    keys = kms_keys()
    in_place = {k: f.to_bytes() for k, f in read_filters(rewritten, keys).items()}
    monkeypatch.setattr(encrypted_reads, "_open_in_place", lambda *args: None)
    checked = {k: f.to_bytes() for k, f in read_filters(rewritten, keys).items()}
    assert checked == in_place
    assert sum(checked_calls) == len(reference_filters(rewritten, keys)) > 0


def test_filters_opened_in_place_are_their_own_and_writable(rewritten: Path) -> None:
    found = read_filters(rewritten, kms_keys())
    words = [f.words for f in found.values()]
    for i, a in enumerate(words):
        assert all(not np.shares_memory(a, b) for b in words[i + 1 :])
    f = found[(0, "a")]
    absent = next(v for v in range(10**9, 10**9 + 10_000) if not f.might_contain(v, "INT64"))
    f.insert(absent, "INT64")
    assert f.might_contain(absent, "INT64")


# --- the in-place opening on its own: modules built here, each way it must decline ----------

KEY = bytes(range(16))
AADS = cipher.FilterAads(b"file-aad")
HEADER_AAD, BITSET_AAD = AADS.of(3, 5)
BITSET = bytes(range(256)) * 4  # 1 KiB


def modules(
    header: bytes | None = None,
    bitset: bytes = BITSET,
    header_aad: bytes = HEADER_AAD,
    bitset_aad: bytes = BITSET_AAD,
) -> bytearray:
    """A filter as writers lay it out: the header's module, then the bitset's."""
    plain = fmt.encode_bloom_filter_header(len(bitset)) if header is None else header
    return bytearray(
        cipher.encrypt_gcm(plain, KEY, header_aad) + cipher.encrypt_gcm(bitset, KEY, bitset_aad)
    )


def open_in_place(
    data: bytes | bytearray, length: int | None = -1, room: int = 1 << 30
) -> pb.SplitBlockBloomFilter | None:
    return encrypted_reads._open_in_place(
        memoryview(bytes(data)),
        len(data) if length == -1 else length,
        room,
        cipher.Gcm(KEY),
        HEADER_AAD,
        BITSET_AAD,
    )


def test_a_filter_laid_out_as_writers_do_opens_in_place() -> None:
    data = modules()
    for length in (len(data), None):
        found = open_in_place(data, length)
        assert found is not None and found.to_bytes() == BITSET
    # With more bytes after it (its neighbours, read with it), its length unknown.
    found = open_in_place(data + b"\x00" * 100, None)
    assert found is not None and found.to_bytes() == BITSET
    # Its header followed by bytes its decoding ignores: parquet-java pads its encrypted
    # headers with zeros to 100 bytes.
    canonical = fmt.encode_bloom_filter_header(len(BITSET))
    for padding in (b"\x00", b"\x00" * (100 - len(canonical)), b"\x07\x00\x01"):
        found = open_in_place(modules(canonical + padding))
        assert found is not None and found.to_bytes() == BITSET
    # Every size of header: numBytes' varint of 1 to 4 bytes.
    for num_bytes in (32, 64, 8192, 1 << 20):
        bitset = bytes(range(256)) * (num_bytes // 256) if num_bytes >= 256 else BITSET[:num_bytes]
        found = open_in_place(modules(bitset=bitset))
        assert found is not None and found.to_bytes() == bitset
        padded = fmt.encode_bloom_filter_header(num_bytes) + b"\x00" * 3
        found = open_in_place(modules(padded, bitset=bitset))
        assert found is not None and found.to_bytes() == bitset


def header_len(data: bytearray) -> int:
    return int(struct.unpack_from("<I", data)[0])


def declined() -> Iterator[tuple[str, bytes | bytearray, int | None, int]]:
    """(why, bytes, the footer's length, room before the footer) that must be declined."""
    data = modules()
    n, h = len(data), header_len(data)
    yield "the footer's length disagrees", data, n - 1, 1 << 20
    yield "runs past the footer", data, None, n - 1
    yield "cut short", data[:-1], None, 1 << 20
    yield "cut in the header", data[: h + 2], None, 1 << 20
    yield "four bytes", data[:4], None, 1 << 20
    for claim in (0, 27, h - 1, h + 1, 10_000, 0xFFFFFFFF):
        lying = bytearray(data)
        lying[:4] = struct.pack("<I", claim)
        yield f"header length prefix {claim}", lying, None, 1 << 20
    lying = bytearray(data)
    lying[4 + h : 8 + h] = struct.pack("<I", len(BITSET) // 2 + 28)
    yield "bitset length prefix", lying, None, 1 << 20
    for at in (5, 4 + 12, 4 + h - 1, 8 + h, 8 + h + 12, n - 1):
        flipped = bytearray(data)
        flipped[at] ^= 1
        yield f"byte {at} flipped", flipped, None, 1 << 20
    yield "header AAD", modules(header_aad=BITSET_AAD), None, 1 << 20
    yield "bitset AAD", modules(bitset_aad=HEADER_AAD), None, 1 << 20
    yield "modules swapped", modules(header_aad=AADS.of(3, 6)[0]), None, 1 << 20
    canonical = fmt.encode_bloom_filter_header(len(BITSET))
    # The header of a newer writer: an unknown field 5 (i32) before the stop byte.
    newer = canonical[:-1] + b"\x15\x02\x00"
    yield "a header with an unknown field", modules(newer), None, 1 << 20
    yield (
        "numBytes not a power of two",
        modules(fmt.encode_bloom_filter_header(1000), BITSET[:1000]),
        None,
        1 << 20,
    )


@pytest.mark.parametrize("why, data, length, room", list(declined()), ids=lambda v: str(v)[:30])
def test_anything_else_is_declined(
    why: str, data: bytes | bytearray, length: int | None, room: int
) -> None:
    assert open_in_place(data, length, room) is None, why


def test_a_valid_header_written_otherwise_is_read_step_by_step() -> None:
    """A header with an unknown field is declined in place but is a valid header: the
    step-by-step decoding accepts it, as it accepts any writer's."""
    canonical = fmt.encode_bloom_filter_header(len(BITSET))
    header, size = fmt.parse_bloom_filter_header(canonical[:-1] + b"\x15\x02\x00")
    assert header.num_bytes == len(BITSET) and size == len(canonical) + 2


def test_gcm_tries_agree_with_decrypt() -> None:
    gcm = cipher.Gcm(KEY)
    sealed = memoryview(cipher.encrypt_gcm(BITSET, KEY, BITSET_AAD))[4:]
    assert gcm.try_decrypt(sealed, BITSET_AAD) == gcm.decrypt(
        sealed, BITSET_AAD, module_type=cipher.BLOOM_FILTER_BITSET
    )
    assert gcm.try_decrypt(sealed, HEADER_AAD) is None
    assert gcm.try_decrypt(sealed[:27], BITSET_AAD) is None
    with pytest.raises(DecryptionError):
        gcm.decrypt(sealed, HEADER_AAD, module_type=cipher.BLOOM_FILTER_BITSET)
    out = np.zeros(len(BITSET), np.uint8)
    assert gcm.try_decrypt_into(sealed, BITSET_AAD, out) and out.tobytes() == BITSET
    assert not gcm.try_decrypt_into(sealed, HEADER_AAD, np.zeros(len(BITSET), np.uint8))
    assert not gcm.try_decrypt_into(sealed, BITSET_AAD, np.zeros(len(BITSET) - 1, np.uint8))


class _WithoutDecryptInto:
    """cryptography's AESGCM as releases before ``decrypt_into`` had it: the real cipher,
    its ``decrypt`` alone."""

    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._real = AESGCM(key)

    def decrypt(self, nonce: Any, data: Any, aad: Any) -> bytes:
        return bytes(self._real.decrypt(nonce, data, aad))


def test_gcm_decrypts_into_without_decrypt_into() -> None:
    gcm = cipher.Gcm(KEY)
    gcm._aead = _WithoutDecryptInto(KEY)
    sealed = memoryview(cipher.encrypt_gcm(BITSET, KEY, BITSET_AAD))[4:]
    out = np.zeros(len(BITSET), np.uint8)
    assert gcm.try_decrypt_into(sealed, BITSET_AAD, out) and out.tobytes() == BITSET
    assert not gcm.try_decrypt_into(sealed, HEADER_AAD, out)


@pytest.mark.parametrize("part", ["header", "bitset"])
def test_a_tampered_filter_is_declined_in_place_and_reported_located(
    tmp_path: Path, checked_calls: list[int], part: str
) -> None:
    """A flipped byte: the in-place opening declines that filter alone (the other opens in
    place), and the step-by-step path reports it, located, naming the module."""
    data = bytearray(BLOOM.read_bytes())
    with pb.BloomFilterReader(BLOOM, decryption=BLOOM_KEYS) as reader:
        offset = reader.column_chunk(0, "double_field").bloom_filter_offset
    assert offset is not None
    (header_len,) = struct.unpack_from("<I", data, offset)
    data[offset + 4 + 20 if part == "header" else offset + 4 + header_len + 4 + 100] ^= 1
    path = tmp_path / "tampered.parquet"
    path.write_bytes(bytes(data))
    with pb.BloomFilterReader(path, decryption=BLOOM_KEYS) as reader:
        found, failed = reader.filters_with_errors()
    assert checked_calls == [1]
    assert set(found) == {(0, "float_field")} and set(failed) == {(0, "double_field")}
    err = failed[(0, "double_field")]
    assert type(err) is DecryptionError and err.module == f"Bloom filter {part}"
    assert (err.source, err.row_group, err.column, err.offset) == (
        str(path),
        0,
        "double_field",
        offset,
    )
