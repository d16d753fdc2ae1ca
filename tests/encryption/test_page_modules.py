"""The pages of an encrypted chunk as the rewrite decrypts them to hash: every module, header
and body, dictionary and data pages, authenticated where it lies, each error located.

The file: pyarrow (Arrow C++) writes one column, dictionary-encoded in small data pages, under
one key (uniform encryption, encrypted footer), so that a chunk holds a dictionary page and
several data pages, whose AADs carry page ordinals 0, 1, 2, ... (Encryption.md 4.4.2). The
chunk's modules are found here from the spec's serialization alone (5.1: a 4-byte length, then
that many bytes), independently of ``parquet_bloom._crypto``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import parquet_bloom as pb
from parquet_bloom import DecryptionKeys
from parquet_bloom._crypto import cipher, pages
from parquet_bloom._crypto.pages import OPENED_AT_ONCE, decrypted_pages
from parquet_bloom._format.page_header import PageHeader, PageType, _tt, encode_page_header
from parquet_bloom._rewrite import encryption
from parquet_bloom.errors import CorruptFileError, DecryptionError, UnsupportedFileError
from tests.encryption import reference

KEY = b"0123456789abcdef"
ROWS = 4000


def write(path: Path, algorithm: str = "AES_GCM_V1") -> Path:
    values = pa.array([i % 1500 for i in range(ROWS)], pa.int64())
    props = pe.create_encryption_properties(KEY, encryption_algorithm=algorithm)
    pq.write_table(
        pa.table({"a": values}),
        path,
        data_page_size=512,
        write_batch_size=256,
        encryption_properties=props,
    )
    return path


def keys() -> DecryptionKeys:
    return DecryptionKeys(footer_key=KEY)


def modules(path: Path) -> list[tuple[int, int, int]]:
    """(page offset, module offset, module length with its prefix) of every module of the
    file's one chunk: a header module then a body module per page."""
    with pb.BloomFilterReader(path, decryption=keys()) as reader:
        (chunk,) = reader.row_group(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = path.read_bytes()
    found = []
    at = start
    while at < start + chunk.total_compressed_size:
        page = at
        for _ in range(2):
            (length,) = struct.unpack_from("<I", data, at)
            found.append((page, at, 4 + length))
            at += 4 + length
    assert at == start + chunk.total_compressed_size
    return found


def tampered(src: Path, dst: Path, at: int, mask: int = 0x01) -> Path:
    data = bytearray(src.read_bytes())
    data[at] ^= mask
    dst.write_bytes(bytes(data))
    return dst


def test_the_chunk_has_a_dictionary_and_several_data_pages(tmp_path: Path) -> None:
    src = write(tmp_path / "src.parquet")
    pages = {page for page, _, _ in modules(src)}
    assert len(pages) >= 4  # the dictionary page and at least three data pages
    out = tmp_path / "out.parquet"
    pb.rewrite_bloom_filters(src, out, columns=["a"], decryption=keys())
    with pb.BloomFilterReader(out, decryption=keys()) as reader:
        bloom = reader.filter(0, "a")
    assert all(bloom.might_contain_many(list(range(1500)), "INT64"))
    assert pq.read_table(out, decryption_properties=pe.create_decryption_properties(KEY)) == (
        pq.read_table(src, decryption_properties=pe.create_decryption_properties(KEY))
    )


@pytest.mark.parametrize("where", ["nonce", "ciphertext", "tag"])
def test_every_page_module_is_authenticated_and_located(tmp_path: Path, where: str) -> None:
    """A flipped byte in any module of the chunk (each page's header and body; its nonce, its
    ciphertext, its tag) fails the rewrite with a DecryptionError naming the module, the
    column and the offset of its page; nothing is written."""
    src = write(tmp_path / "src.parquet")
    found = modules(src)
    names = set()
    for i, (page, at, length) in enumerate(found):
        byte = {"nonce": at + 4, "ciphertext": at + 4 + 12, "tag": at + length - 1}[where]
        bad = tampered(src, tmp_path / "bad.parquet", byte)
        dst = tmp_path / "out.parquet"
        with pytest.raises(DecryptionError, match="does not decrypt") as err:
            pb.rewrite_bloom_filters(bad, dst, columns=["a"], decryption=keys())
        assert err.value.column == "a" and err.value.offset == page, (i, err.value)
        names.add(err.value.module)
        assert not dst.exists()
    assert names == {
        cipher.MODULE_NAMES[kind]
        for kind in (
            cipher.DICTIONARY_PAGE_HEADER,
            cipher.DICTIONARY_PAGE,
            cipher.DATA_PAGE_HEADER,
            cipher.DATA_PAGE,
        )
    }


def test_data_pages_swapped_fail_their_page_ordinals(tmp_path: Path) -> None:
    """Two data pages swapped keep every module whole, but not in its place: each module's AAD
    holds its page ordinal, so the first one moved does not decrypt."""
    src = write(tmp_path / "src.parquet")
    found = modules(src)
    data = bytearray(src.read_bytes())
    first, second = found[2][0], found[4][0]  # the first two data pages
    end = found[5][1] + found[5][2]
    data[first:end] = data[second:end] + data[first:second]
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    with pytest.raises(DecryptionError, match="data page header") as err:
        pb.rewrite_bloom_filters(bad, tmp_path / "out.parquet", columns=["a"], decryption=keys())
    assert err.value.offset == first and err.value.column == "a"


@pytest.mark.parametrize("which", [0, 1, 3])
def test_a_length_prefix_claiming_past_the_chunk(tmp_path: Path, which: int) -> None:
    """A module's length prefix (not authenticated) claiming more bytes than the chunk holds
    is a located CorruptFileError, found before anything is sliced or allocated by it."""
    src = write(tmp_path / "src.parquet")
    page, at, _ = modules(src)[which]
    bad = tampered(src, tmp_path / "bad.parquet", at + 2, 0x40)
    with pytest.raises(CorruptFileError, match="claims") as err:
        pb.rewrite_bloom_filters(bad, tmp_path / "out.parquet", columns=["a"], decryption=keys())
    assert err.value.offset == page and err.value.column == "a"


def test_modules_sealed_and_opened_in_place_match_the_spec() -> None:
    """``Gcm.seal_pair``, ``Gcm.open_pair`` and ``Gcm.open_at`` against AES-GCM straight from
    ``cryptography``: two modules sealed in place lie as the spec lays them out and decrypt
    back, in one call or one by one; cut or lying lengths and wrong AADs are refused, by
    ``open_pair`` with None (before anything is sliced by a length), by ``open_at`` with
    what is wrong."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    gcm = cipher.Gcm(KEY)
    first_aad = cipher.module_aad(b"file", cipher.BLOOM_FILTER_HEADER, 3, 4)
    second_aad = cipher.module_aad(b"file", cipher.BLOOM_FILTER_BITSET, 3, 4)
    plains = [b"", b"x" * 7, bytes(range(256)) * 9]
    for i, first in enumerate(plains):
        for j, second in enumerate(plains):
            nonces = bytes([i]) * 12 + bytes([16 + j]) * 12
            out = gcm.seal_pair(first, first_aad, second, second_aad, nonces)
            middle = cipher.sealed_size(len(first))
            assert len(out) == middle + cipher.sealed_size(len(second))
            for at, end, plain, aad, nonce in (
                (0, middle, first, first_aad, nonces[:12]),
                (middle, len(out), second, second_aad, nonces[12:]),
            ):
                (length,) = struct.unpack_from("<I", out, at)
                assert length == end - at - 4 and out[at + 4 : at + 16] == nonce
                assert AESGCM(KEY).decrypt(nonce, bytes(out[at + 16 : end]), aad) == plain
            view = memoryview(bytes(out) + b"after")
            assert gcm.open_pair(view, 0, first_aad, second_aad) == (first, second, len(out))
            got, at = gcm.open_at(view, 0, first_aad, module_type=cipher.BLOOM_FILTER_HEADER)
            assert (got, at) == (first, middle)
            got, at = gcm.open_at(view, at, second_aad, module_type=cipher.BLOOM_FILTER_BITSET)
            assert (got, at) == (second, len(out))
            assert gcm.open_pair(view, 0, second_aad, second_aad) is None  # the first's AAD
            assert gcm.open_pair(view, 0, first_aad, first_aad) is None  # the second's
            for cut in range(len(out)):  # a chunk ending inside either module
                assert gcm.open_pair(view[:cut], 0, first_aad, second_aad) is None
    for short in (bytes(20), bytes(25)):  # two nonces of 12 bytes, or nothing sealed
        with pytest.raises(ValueError, match="two 12-byte nonces"):
            gcm.seal_pair(b"h", first_aad, b"b", second_aad, short)
    out = gcm.seal_pair(b"h", first_aad, b"b" * 40, second_aad, bytes(24))
    view = memoryview(out)
    with pytest.raises(CorruptFileError, match="truncated"):
        gcm.open_at(view, len(out) - 3, first_aad, module_type=cipher.DATA_PAGE)
    with pytest.raises(CorruptFileError, match="claims"):
        gcm.open_at(view[: cipher.sealed_size(1) - 1], 0, first_aad, module_type=cipher.DATA_PAGE)
    for at in (0, cipher.sealed_size(1)):  # either module's length below nonce and tag
        lying = bytearray(out)
        struct.pack_into("<I", lying, at, 27)
        assert gcm.open_pair(memoryview(lying), 0, first_aad, second_aad) is None
        with pytest.raises(CorruptFileError, match="cannot hold a nonce and a tag"):
            gcm.open_at(memoryview(lying), at, first_aad, module_type=cipher.DATA_PAGE)
    elsewhere = cipher.module_aad(b"file", cipher.COLUMN_META_DATA, 3, 4)  # another module's
    with pytest.raises(DecryptionError, match="column metadata does not decrypt"):
        gcm.open_at(view, 0, elsewhere, module_type=cipher.COLUMN_META_DATA)


def test_nonces_are_fresh_and_taken_together() -> None:
    """``Nonces.take``: nonces back to back, never the same twice, across the batches it
    draws from the OS."""
    nonces = cipher.Nonces()
    seen = set()
    for count in [1, 2] * 700 + [3000]:
        taken = nonces.take(count)
        assert len(taken) == 12 * count
        seen.update(taken[i : i + 12] for i in range(0, len(taken), 12))
    assert len(seen) == 700 * 3 + 3000


def _file_aad(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The file AAD the rewrite opens ``src``'s pages with."""
    seen = []
    original = encryption.decrypted_pages

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["file_aad"])
        return original(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(encryption, "decrypted_pages", spy)
        pb.rewrite_bloom_filters(src, tmp_path / "spy.parquet", columns=["a"], decryption=keys())
    return seen[0]


def _resealed(src: Path, dst: Path, file_aad: bytes, plains: dict[int, bytes]) -> Path:
    """``src`` with module i's plaintext replaced by ``plains[i]`` (same size), sealed again
    under its own AAD: a file whose modules all verify but whose plaintext is wrong."""
    data = bytearray(src.read_bytes())
    for i, (_, at, length) in enumerate(modules(src)):
        if i not in plains:
            continue
        page = i // 2
        dictionary = page == 0
        kind = (
            (cipher.DICTIONARY_PAGE_HEADER, cipher.DICTIONARY_PAGE)
            if dictionary
            else (cipher.DATA_PAGE_HEADER, cipher.DATA_PAGE)
        )[i % 2]
        aad = reference.aad(file_aad, kind, 0, 0, None if dictionary else page - 1)
        nonce = bytes(data[at + 4 : at + 16])
        old = AESGCM(KEY).decrypt(nonce, bytes(data[at + 16 : at + length]), aad)
        assert len(plains[i]) == len(old)
        data[at + 16 : at + length] = AESGCM(KEY).encrypt(nonce, plains[i], aad)
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("opened_at_once", [None, 0])
def test_first_bad_page_wins_in_a_small_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened_at_once: int | None
) -> None:
    """A chunk whose first page's body does not decode (every module verifies) and whose last
    page's body is tampered: the first page's error is raised, whether the chunk's pages are
    opened together (a chunk of at most OPENED_AT_ONCE bytes) or one by one."""
    if opened_at_once is not None:  # as a chunk > 1 MiB is opened: page by page
        monkeypatch.setattr(pages, "OPENED_AT_ONCE", opened_at_once)
    src = write(tmp_path / "src.parquet")
    found = modules(src)
    file_aad = _file_aad(src, tmp_path, monkeypatch)
    dict_body = found[1][2] - 4 - 28
    bad = _resealed(src, tmp_path / "bad.parquet", file_aad, {1: b"\xff" * dict_body})
    # baseline: the corrupt dictionary body alone is a located CorruptFileError at page 0
    with pytest.raises(CorruptFileError) as err:
        pb.rewrite_bloom_filters(bad, tmp_path / "o1.parquet", columns=["a"], decryption=keys())
    assert err.value.offset == found[0][0] and err.value.column == "a"
    # and the last module's tag flipped, far from page 0
    data = bytearray(bad.read_bytes())
    _, at, length = found[-1]
    data[at + length - 1] ^= 1
    both = tmp_path / "both.parquet"
    both.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as err:
        pb.rewrite_bloom_filters(both, tmp_path / "o2.parquet", columns=["a"], decryption=keys())
    assert err.value.offset == found[0][0] and err.value.column == "a"


def test_a_page_whose_header_does_not_decode_and_body_is_tampered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Page 1's header verifies but does not decode, and its body is tampered: the header is
    decoded before the body is opened, so its CorruptFileError is the one raised."""
    src = write(tmp_path / "src.parquet")
    found = modules(src)
    file_aad = _file_aad(src, tmp_path, monkeypatch)
    header_size = found[2][2] - 4 - 28
    bad = _resealed(src, tmp_path / "bad.parquet", file_aad, {2: b"\xff" * header_size})
    data = bytearray(bad.read_bytes())
    _, at, length = found[3]
    data[at + length - 1] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as err:
        pb.rewrite_bloom_filters(bad, tmp_path / "o.parquet", columns=["a"], decryption=keys())
    assert err.value.offset == found[2][0] and err.value.column == "a"


def test_an_unreadable_chunk_is_refused_before_its_pages_are_opened(tmp_path: Path) -> None:
    """A chunk whose footer lists an encoding only pyarrow reads (DELTA_BINARY_PACKED) is
    refused (UnsupportedFileError) from the footer alone, whatever its pages hold: nothing of
    it is decrypted before the footer is looked at, so a tampered module changes nothing."""
    src = tmp_path / "delta.parquet"
    pq.write_table(
        pa.table({"a": pa.array(range(4000), pa.int64())}),
        src,
        use_dictionary=False,
        column_encoding={"a": "DELTA_BINARY_PACKED"},
        data_page_size=512,
        encryption_properties=pe.create_encryption_properties(KEY),
    )
    with pytest.raises(UnsupportedFileError):
        pb.rewrite_bloom_filters(src, tmp_path / "o1.parquet", columns=["a"], decryption=keys())
    data = bytearray(src.read_bytes())
    _, at, length = modules(src)[-1]
    data[at + length - 1] ^= 1
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFileError):
        pb.rewrite_bloom_filters(bad, tmp_path / "o2.parquet", columns=["a"], decryption=keys())


@pytest.mark.parametrize("algorithm", ["AES_GCM_V1", "AES_GCM_CTR_V1"])
def test_page_ordinal_past_32767_is_located(algorithm: str) -> None:
    """A chunk of more than 32,768 data pages (so more than OPENED_AT_ONCE bytes, opened page by
    page): data page 32768's ordinal does not fit the AAD's two bytes, and the error carries
    that page's offset, after the pages before it were handed out."""
    header = PageHeader(
        type=PageType.DATA_PAGE,
        uncompressed_page_size=4,
        compressed_page_size=4,
        data_page_header=_tt.DataPageHeader(
            num_values=1, encoding=0, definition_level_encoding=3, repetition_level_encoding=3
        ),
    )
    plain_header = encode_page_header(header)
    gcm = AESGCM(KEY)
    file_aad = b"file"
    out = bytearray()
    offsets = []
    for page in range(32769):
        offsets.append(len(out))
        nonce = page.to_bytes(12, "little")
        aad = reference.aad(file_aad, cipher.DATA_PAGE_HEADER, 0, 0, page & 0x7FFF)
        sealed = nonce + gcm.encrypt(nonce, plain_header, aad)
        out += len(sealed).to_bytes(4, "little") + sealed
        if algorithm == "AES_GCM_CTR_V1":
            body = nonce + bytes(4)  # CTR: no tag; its bytes are not checked
        else:
            body = nonce + gcm.encrypt(
                nonce, bytes(4), reference.aad(file_aad, cipher.DATA_PAGE, 0, 0, page & 0x7FFF)
            )
        out += len(body).to_bytes(4, "little") + body
    assert len(out) > OPENED_AT_ONCE
    handed = decrypted_pages(
        bytes(out),
        gcm=cipher.Gcm(KEY),
        file_aad=file_aad,
        algorithm=algorithm,
        row_group=0,
        column=0,
        dictionary_first=False,
        base=1000,
    )
    seen = 0
    with pytest.raises(DecryptionError, match="32768") as err:
        for _ in handed:
            seen += 1
    assert seen == 32768
    assert err.value.offset == 1000 + offsets[32768]
