"""The pages of one encrypted column chunk, decrypted: what a filter of the chunk is built from.

Pure: the chunk's bytes and its key in, plaintext pages out. Each page of an encrypted chunk
is two modules (Encryption.md 5.1, 4.4.2): its header, GCM-encrypted (module type 4 for a data
page, with the page's ordinal in the AAD; 5 for the dictionary page, without), then its body
(type 2 / 3 likewise), GCM-encrypted under AES_GCM_V1 and CTR-encrypted under AES_GCM_CTR_V1
(4.2.2). The ordinal counts the chunk's data pages from 0; the dictionary page takes none.

The plaintext header's ``compressed_page_size`` is the size of the encrypted body module, length
prefix included (parquet-java's ColumnChunkPageWriter and Arrow C++'s SerializedPageWriter
set it after encrypting); the pages handed out here carry their plaintext size instead, so that
they read as any other chunk's (:func:`parquet_bloom._pages.page_hashes`). Each header is
decoded once, each body not copied again.

Under AES_GCM_V1 a page's two modules are opened in one call (:meth:`cipher.Gcm.open_pair`):
a chunk costs its AES calls and little Python around them. A chunk of at most
:data:`OPENED_AT_ONCE` bytes has its pages opened together when the first is asked for, a
larger one page by page. From a page whose modules are not whole or do not verify on, they
are opened one by one (:meth:`cipher.Gcm.open_at`), each header decoded before its body is
opened, as are the pages of a chunk under AES_GCM_CTR_V1 (CTR-encrypted bodies): so the
error raised is the first page's, in the chunk's order, whichever way it was opened, and says,
located, what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom._crypto import cipher
from parquet_bloom.errors import BloomFilterError, CorruptFileError, DecryptionError

__all__ = ["chunk_layout", "decrypted_pages"]


def _ctr_module(data: memoryview, at: int, module_type: int) -> tuple[memoryview, int]:
    """The bytes after the length prefix of the CTR module at ``at`` (``nonce | ciphertext``,
    a page body under AES_GCM_CTR_V1), and where the next begins; the length checked against
    what the chunk holds before anything is sliced by it (CTR authenticates nothing)."""
    available = len(data) - at - cipher.LENGTH_SIZE
    if available < 0:
        raise CorruptFileError(
            f"truncated encrypted {cipher.MODULE_NAMES[module_type]}: its length prefix is cut"
        )
    length = int.from_bytes(data[at : at + cipher.LENGTH_SIZE], "little")
    if not cipher.NONCE_SIZE <= length <= available:
        raise CorruptFileError(
            f"encrypted {cipher.MODULE_NAMES[module_type]} claims {length} bytes; it holds a "
            f"{cipher.NONCE_SIZE}-byte nonce and only {available} bytes follow in the chunk"
        )
    start = at + cipher.LENGTH_SIZE
    return data[start : start + length], start + length


# A chunk of at most this many bytes has its pages opened together, their AES calls one after
# the other (their code hot in the CPU's caches) rather than between decompressing and hashing
# pages (docs/performance.md, the encrypted rewrite); its plaintext then held at once beside
# its bytes. A larger chunk is opened page by page, as its pages are asked for.
OPENED_AT_ONCE = 1024 * 1024


def decrypted_pages(
    data: bytes | memoryview,
    *,
    gcm: cipher.Gcm,
    file_aad: bytes,
    algorithm: str,
    row_group: int,
    column: int,
    dictionary_first: bool,
    base: int = 0,
) -> Iterator[tuple[int, Any, bytes]]:
    """The pages of one encrypted column chunk, decrypted, ``data`` its
    ``total_compressed_size`` bytes from its first page and ``gcm`` its key's AES-GCM: each
    as (its file offset, its PageHeader with the plaintext body size, its plaintext body).
    Nothing is decrypted before the first page is asked for.

    ``dictionary_first``: the footer says the chunk starts with a dictionary page. Errors
    carry the file offset of the page they are about (``base``: the chunk's).
    """
    view = memoryview(data)
    try:
        aads = cipher.PageAads(file_aad, row_group, column)
    except DecryptionError as err:
        raise DecryptionError(err.reason, module=err.module, offset=base) from None
    if algorithm == "AES_GCM_CTR_V1":
        yield from _modules(view, gcm, aads, dictionary_first, base, ctr=True)
    else:
        at_once = len(view) <= OPENED_AT_ONCE
        yield from _gcm_pages(view, gcm, aads, dictionary_first, base, at_once=at_once)


def _gcm_pages(
    view: memoryview,
    gcm: cipher.Gcm,
    aads: cipher.PageAads,
    dictionary_first: bool,
    base: int,
    *,
    at_once: bool,
) -> Iterator[tuple[int, Any, bytes]]:
    """The pages of an AES_GCM_V1 chunk, each page's two modules opened in one call; all the
    chunk's pages at once (``at_once``) or each when it is asked for. From the first page
    that call refuses (or whose page ordinal no AAD can hold) on, the pages opened before it
    are handed out first, then the rest module by module (:func:`_modules`), which says what
    is wrong."""
    end = len(view)
    open_pair = gcm.open_pair
    at = 0
    ordinal = 0
    while at < end:
        opened = []  # (page offset, dictionary page?, header, body), up to a page refused
        refused = False
        while at < end:
            page_at = at
            dictionary = dictionary_first and page_at == 0
            try:
                header_aad, body_aad = aads.dictionary if dictionary else aads.data_page(ordinal)
            except DecryptionError:  # said, located, by _modules in the pages' order
                refused = True
                break
            pair = open_pair(view, at, header_aad, body_aad)
            if pair is None:
                refused = True
                break
            plain, body, at = pair
            opened.append((page_at, dictionary, plain, body))
            if not dictionary:
                ordinal += 1
            if not at_once:
                break
        for page_at, dictionary, plain, body in opened:
            header = _header(plain, dictionary, base + page_at)
            header.compressed_page_size = len(body)
            yield base + page_at, header, body
        if refused:
            yield from _modules(
                view, gcm, aads, dictionary_first, base, ctr=False, at=at, ordinal=ordinal
            )
            return


def _header(plain: bytes, dictionary: bool, offset: int) -> Any:
    """A page's header decoded from its module's plaintext, checked to be the dictionary page
    where the footer says it is (and only there); errors at the page's file ``offset``."""
    try:
        # parquet-mr 1.14 leaves zero bytes after the header in its module: not read.
        header, _ = fmt.parse_page_header(plain)
    except BloomFilterError as err:
        raise CorruptFileError(err.reason, offset=offset) from None
    if (header.type == fmt.PageType.DICTIONARY_PAGE) != dictionary:
        raise CorruptFileError(
            "a dictionary page that is not the chunk's first page, or a first page that is "
            "not the dictionary page the footer announces",
            offset=offset,
        )
    return header


def _modules(
    view: memoryview,
    gcm: cipher.Gcm,
    aads: cipher.PageAads,
    dictionary_first: bool,
    base: int,
    *,
    ctr: bool,
    at: int = 0,
    ordinal: int = 0,
) -> Iterator[tuple[int, Any, bytes]]:
    """The pages from ``at`` (data page ``ordinal`` there) on, each module opened by itself
    (:meth:`cipher.Gcm.open_at`) and each header decoded before its body is opened, errors
    located: the pages of a chunk under AES_GCM_CTR_V1, and those of a chunk from the page
    :func:`_gcm_pages` could not open on, to say what is wrong with them."""
    end = len(view)
    open_at = gcm.open_at
    while at < end:
        page_at = at
        dictionary = dictionary_first and page_at == 0
        try:
            if dictionary:
                header_aad, body_aad = aads.dictionary
                header_type, body_type = cipher.DICTIONARY_PAGE_HEADER, cipher.DICTIONARY_PAGE
            else:
                header_aad, body_aad = aads.data_page(ordinal)
                header_type, body_type = cipher.DATA_PAGE_HEADER, cipher.DATA_PAGE
            plain, at = open_at(view, at, header_aad, module_type=header_type)
            header = _header(plain, dictionary, base + page_at)
            if ctr:
                body, at = _ctr_module(view, at, body_type)
                page_body = cipher.decrypt_ctr(body, gcm.key, module_type=body_type)
            else:
                page_body, at = open_at(view, at, body_aad, module_type=body_type)
        except DecryptionError as err:
            raise DecryptionError(err.reason, module=err.module, offset=base + page_at) from None
        except BloomFilterError as err:
            raise CorruptFileError(err.reason, offset=base + page_at) from None
        header.compressed_page_size = len(page_body)
        yield base + page_at, header, page_body
        if not dictionary:
            ordinal += 1


def chunk_layout(meta: Any) -> tuple[int, int, bool]:
    """(start, size, dictionary first) of a column chunk's pages, from its ColumnMetaData."""
    start = fmt.chunk_start(meta)
    dictionary = meta.dictionary_page_offset is not None and start == meta.dictionary_page_offset
    return start, int(meta.total_compressed_size), dictionary
