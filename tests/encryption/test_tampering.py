"""Bad input: tampered, truncated or misplaced modules, wrong keys and AAD prefixes. Each is a
typed, located error, nothing is allocated from an unauthenticated length beyond the file's
size, and no tampered filter is ever returned."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom._crypto import cipher
from parquet_bloom.errors import BloomFilterError, CorruptFileError, DecryptionError
from tests.encryption.keys import COLUMN_KEYS, DATA, FOOTER_KEY

BLOOM = DATA / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted"
PLAINTEXT_FOOTER = DATA / "encrypt_columns_plaintext_footer.parquet.encrypted"
KEYS = DecryptionKeys(FOOTER_KEY, COLUMN_KEYS)


def filter_span(path: Path = BLOOM, column: str = "double_field") -> tuple[int, int, int]:
    """The filter's offset, length, and its header module's length."""
    with pb.BloomFilterReader(path, decryption=KEYS) as reader:
        chunk = reader.column_chunk(0, column)
    assert chunk.bloom_filter_offset is not None and chunk.bloom_filter_length is not None
    data = path.read_bytes()
    (header_len,) = struct.unpack_from("<I", data, chunk.bloom_filter_offset)
    return chunk.bloom_filter_offset, chunk.bloom_filter_length, header_len


def patched(tmp_path: Path, at: int, new: bytes, source: Path = BLOOM) -> Path:
    data = bytearray(source.read_bytes())
    data[at : at + len(new)] = new
    out = tmp_path / f"patched-{at}.parquet"
    out.write_bytes(bytes(data))
    return out


def flipped(tmp_path: Path, at: int, source: Path = BLOOM) -> Path:
    return patched(tmp_path, at, bytes([source.read_bytes()[at] ^ 0x01]), source)


def good_filters() -> dict[tuple[int, str], bytes]:
    with pb.BloomFilterReader(BLOOM, decryption=KEYS) as reader:
        return {k: f.to_bytes() for k, f in reader.filters().items()}


def test_module_aads_as_the_spec_lays_them_out() -> None:
    file_aad = b"prefix" + b"\xaa" * 8
    assert cipher.module_aad(file_aad, cipher.FOOTER) == file_aad + b"\x00"
    assert cipher.module_aad(file_aad, cipher.BLOOM_FILTER_HEADER, 1, 2) == (
        file_aad + b"\x08\x01\x00\x02\x00"
    )
    assert cipher.module_aad(file_aad, cipher.BLOOM_FILTER_BITSET, 258, 3) == (
        file_aad + b"\x09\x02\x01\x03\x00"
    )
    assert cipher.module_aad(file_aad, cipher.DATA_PAGE_HEADER, 0, 1, 5) == (
        file_aad + b"\x04\x00\x00\x01\x00\x05\x00"
    )
    with pytest.raises(DecryptionError, match="ordinal"):
        cipher.module_aad(file_aad, cipher.BLOOM_FILTER_HEADER, 40000, 0)


def test_a_module_decrypts_only_in_its_place() -> None:
    """The header module of double_field (row group 0, column 0) fails the tag under any other
    module type or ordinal: modules cannot be swapped."""
    offset, _, header_len = filter_span()
    body = BLOOM.read_bytes()[offset + 4 : offset + 4 + header_len]
    with pb.BloomFilterReader(BLOOM, decryption=KEYS) as reader:
        file_aad = reader._decryptor.file_aad  # type: ignore[union-attr]
    key = COLUMN_KEYS["double_field"]

    def decrypt(module: int, rg: int, col: int, key: bytes = key) -> bytes:
        aad = cipher.module_aad(file_aad, module, rg, col)
        return cipher.decrypt_gcm(body, key, aad, module_type=module)

    header, _ = pb._format.parse_bloom_filter_header(decrypt(cipher.BLOOM_FILTER_HEADER, 0, 0))
    assert header.num_bytes == 2048
    for module, rg, col in ((cipher.BLOOM_FILTER_BITSET, 0, 0), (8, 1, 0), (8, 0, 1)):
        with pytest.raises(DecryptionError, match="GCM tag"):
            decrypt(module, rg, col)
    with pytest.raises(DecryptionError):
        decrypt(cipher.BLOOM_FILTER_HEADER, 0, 0, key=COLUMN_KEYS["float_field"])
    with pytest.raises(DecryptionError):  # a truncated module
        cipher.decrypt_gcm(body[:-1], key, b"", module_type=8)
    with pytest.raises(CorruptFileError, match="nonce and a tag"):
        cipher.decrypt_gcm(body[:27], key, b"", module_type=8)
    with pytest.raises(CorruptFileError, match="length prefix"):
        cipher.module_length(b"\x01\x02\x03", available=100, module_type=8)


@pytest.mark.parametrize("part", ["header", "bitset"])
def test_a_flipped_byte_in_a_filter_is_a_located_error(tmp_path: Path, part: str) -> None:
    offset, _length, header_len = filter_span()
    at = offset + 4 + 20 if part == "header" else offset + 4 + header_len + 4 + 100
    with pb.BloomFilterReader(flipped(tmp_path, at), decryption=KEYS) as reader:
        filters, failed = reader.filters_with_errors()
        err = failed[(0, "double_field")]
        assert type(err) is DecryptionError
        assert err.module == f"Bloom filter {part}"
        assert (err.row_group, err.column, err.offset) == (0, "double_field", offset)
        assert err.source is not None and err.source.endswith(".parquet")
        assert f"module: Bloom filter {part}" in str(err)
        # The other column's filter is untouched by it.
        assert filters[(0, "float_field")].to_bytes() == good_filters()[(0, "float_field")]


def test_every_byte_of_a_filter_is_authenticated(tmp_path: Path) -> None:
    """Flip each byte of double_field's filter (both modules, length prefixes included): the
    filter is never returned, the error is always a BloomFilterError located at it, and nothing
    is read beyond the file."""
    offset, length, _ = filter_span()
    size = BLOOM.stat().st_size
    good = good_filters()
    for at in range(offset, offset + length, 3):
        with pb.BloomFilterReader(flipped(tmp_path, at), decryption=KEYS) as reader:
            filters, failed = reader.filters_with_errors()
            assert (0, "double_field") not in filters, at
            err = failed[(0, "double_field")]
            assert isinstance(err, DecryptionError | CorruptFileError), (at, err)
            assert (err.row_group, err.column) == (0, "double_field")
            assert filters[(0, "float_field")].to_bytes() == good[(0, "float_field")]
            assert reader.bytes_read <= size


@pytest.mark.parametrize("claim", [0, 27, 0xFFFFFFFF, 40_000])
def test_a_lying_length_prefix(tmp_path: Path, claim: int) -> None:
    """A header module claiming too little, more than the file holds, or more than any header:
    a CorruptFileError before anything is read by it."""
    offset, _, _ = filter_span()
    path = patched(tmp_path, offset, struct.pack("<I", claim))
    with pb.BloomFilterReader(path, decryption=KEYS) as reader:
        _, failed = reader.filters_with_errors()
        assert reader.bytes_read <= path.stat().st_size
    err = failed[(0, "double_field")]
    assert isinstance(err, CorruptFileError | DecryptionError)
    assert err.offset == offset
    if claim in (0, 27, 0xFFFFFFFF):
        assert isinstance(err, CorruptFileError)


def test_a_bitset_length_prefix_that_disagrees_with_the_header(tmp_path: Path) -> None:
    offset, _, header_len = filter_span()
    at = offset + 4 + header_len
    path = patched(tmp_path, at, struct.pack("<I", 1024 + 28))
    with pb.BloomFilterReader(path, decryption=KEYS) as reader:
        _, failed = reader.filters_with_errors()
    err = failed[(0, "double_field")]
    assert isinstance(err, CorruptFileError) and "header says 2048" in err.reason


def test_a_tampered_encrypted_footer(tmp_path: Path) -> None:
    """Every byte of the encrypted FileMetaData module: the file does not open. (The
    FileCryptoMetaData before it is not encrypted: a flip there either fails too, or changes
    only what the given keys make irrelevant, such as key metadata.)"""
    data = BLOOM.read_bytes()
    (footer_len,) = struct.unpack_from("<I", data, len(data) - 8)
    start = len(data) - 8 - footer_len
    good = good_filters()
    failures = 0
    for at in range(start, len(data) - 8, 5):
        path = flipped(tmp_path, at)
        try:
            with pb.BloomFilterReader(path, decryption=KEYS) as reader:
                got = {k: f.to_bytes() for k, f in reader.filters().items()}
        except BloomFilterError as err:
            assert err.source == str(path)
            failures += 1
            continue
        assert got == good, at  # only unauthenticated, unused bytes changed
    assert failures > (footer_len // 5) * 0.9


def test_a_tampered_plaintext_footer_fails_its_signature(tmp_path: Path) -> None:
    data = PLAINTEXT_FOOTER.read_bytes()
    (footer_len,) = struct.unpack_from("<I", data, len(data) - 8)
    start = len(data) - 8 - footer_len
    for at in range(start, len(data) - 8, 7):
        path = flipped(tmp_path, at, PLAINTEXT_FOOTER)
        with pytest.raises(BloomFilterError) as info:
            pb.BloomFilterReader(path, decryption=KEYS)
        assert info.value.source == str(path)


def test_truncated_files(tmp_path: Path) -> None:
    """A file cut anywhere in its filters or footer: a typed error, never a filter."""
    data = BLOOM.read_bytes()
    offset, _, _ = filter_span()
    for cut in range(offset, len(data), 997):
        path = tmp_path / "cut.parquet"
        path.write_bytes(data[:cut])
        with pytest.raises(BloomFilterError), pb.BloomFilterReader(path, decryption=KEYS) as r:
            r.filters()
