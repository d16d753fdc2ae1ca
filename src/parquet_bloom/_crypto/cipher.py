"""The ciphers of Parquet Modular Encryption, and the AADs that bind each module to its place.

Pure: bytes and keys in, plaintext out; nothing here reads a file. AES-GCM comes from
the ``cryptography`` package (the ``encryption`` extra), imported when first needed.

Everything cited is parquet-format ``Encryption.md``:

- 5.1: a module is ``length (4 bytes LE) | nonce (12) | ciphertext | tag (16)`` for GCM; the
  length counts the bytes after it. Only pages are CTR-encrypted under AES_GCM_CTR_V1 (4.2.2);
  every module this library reads (footer, column metadata, Bloom filter header and bitset) is
  GCM in both algorithms, so there is no CTR here.
- 4.4: a module's AAD is the AAD prefix, the file's unique id, the module type (1 byte), and for
  all modules but the footer the row group and column ordinals (2-byte LE shorts), and for data
  pages and their headers the page ordinal.
- 5.5: a plaintext footer is signed by the nonce and tag (28 bytes) that GCM-encrypting it with
  the footer key and the footer AAD gives; only those are stored, after the footer.
"""

from __future__ import annotations

import hmac
import os
import struct
from typing import Any

from parquet_bloom._extras import require
from parquet_bloom.errors import CorruptFileError, DecryptionError

# --- Module serialization (Encryption.md 5.1) ------------------------------------------------
LENGTH_SIZE = 4  # little-endian length before every module
NONCE_SIZE = 12  # 96-bit nonce (4.1.3)
TAG_SIZE = 16  # GCM tag (4.2.1)
GCM_OVERHEAD = NONCE_SIZE + TAG_SIZE
SIGNATURE_SIZE = NONCE_SIZE + TAG_SIZE  # plaintext footer signature (5.5)
KEY_SIZES = (16, 24, 32)  # AES-128, -192, -256 (section 4)

# --- Module types (Encryption.md 4.4.2) ------------------------------------------------------
FOOTER = 0
COLUMN_META_DATA = 1
DATA_PAGE = 2
DICTIONARY_PAGE = 3
DATA_PAGE_HEADER = 4
DICTIONARY_PAGE_HEADER = 5
COLUMN_INDEX = 6
OFFSET_INDEX = 7
BLOOM_FILTER_HEADER = 8
BLOOM_FILTER_BITSET = 9

MODULE_NAMES = {
    FOOTER: "footer",
    COLUMN_META_DATA: "column metadata",
    DATA_PAGE: "data page",
    DICTIONARY_PAGE: "dictionary page",
    DATA_PAGE_HEADER: "data page header",
    DICTIONARY_PAGE_HEADER: "dictionary page header",
    COLUMN_INDEX: "column index",
    OFFSET_INDEX: "offset index",
    BLOOM_FILTER_HEADER: "Bloom filter header",
    BLOOM_FILTER_BITSET: "Bloom filter bitset",
}

_ORDINAL_MAX = 0x7FFF  # ordinals are Thrift i16 / Java shorts: at most 32767 of each


def module_aad(
    file_aad: bytes,
    module_type: int,
    row_group: int | None = None,
    column: int | None = None,
    page: int | None = None,
) -> bytes:
    """The AAD of one module (Encryption.md 4.4.2): ``file_aad`` (AAD prefix + the file's
    unique id), the module type, and the ordinals it takes (none for the footer)."""
    if module_type not in MODULE_NAMES:
        raise ValueError(f"unknown module type {module_type}")
    if module_type == FOOTER:
        return file_aad + bytes([module_type])
    if row_group is None or column is None:
        raise ValueError(f"a {MODULE_NAMES[module_type]} AAD needs a row group and a column")
    if not (
        0 <= row_group <= _ORDINAL_MAX
        and 0 <= column <= _ORDINAL_MAX
        and (page is None or 0 <= page <= _ORDINAL_MAX)
    ):
        for what, n in (("row group", row_group), ("column", column), ("page", page)):
            if n is not None and not 0 <= n <= _ORDINAL_MAX:
                raise DecryptionError(
                    f"{what} ordinal {n} does not fit the AAD's 2-byte ordinal (at most "
                    f"{_ORDINAL_MAX})",
                    module=MODULE_NAMES[module_type],
                )
    if module_type in (DATA_PAGE, DATA_PAGE_HEADER):
        if page is None:
            raise ValueError(f"a {MODULE_NAMES[module_type]} AAD needs a page ordinal")
        return file_aad + _TYPE_AND_THREE_ORDINALS.pack(module_type, row_group, column, page)
    return file_aad + _TYPE_AND_TWO_ORDINALS.pack(module_type, row_group, column)


# The AAD suffixes after the file AAD: the module type (1 byte), then 2-byte LE ordinals.
_TYPE_AND_TWO_ORDINALS = struct.Struct("<Bhh")
_TYPE_AND_THREE_ORDINALS = struct.Struct("<Bhhh")


class AadBuffer:
    """Module AADs of one file (4.4.2) written in place, into one buffer allocated once: for
    a caller that opens module after module (the filters of a file, the pages of a chunk) on
    one thread. An AAD it gives is valid until its next call; :func:`module_aad` gives one
    to keep."""

    __slots__ = ("_at", "_buf", "_two", "_view")

    def __init__(self, file_aad: bytes) -> None:
        self._at = len(file_aad)
        self._buf = bytearray(file_aad) + bytearray(_TYPE_AND_THREE_ORDINALS.size)
        self._view = memoryview(self._buf)
        self._two = self._view[: self._at + _TYPE_AND_TWO_ORDINALS.size]

    def of(
        self, module_type: int, row_group: int, column: int, page: int | None = None
    ) -> memoryview:
        """The AAD of a module other than the footer, as :func:`module_aad` makes and checks
        it (a page ordinal for data pages and their headers only)."""
        paged = module_type in (DATA_PAGE, DATA_PAGE_HEADER)
        if (
            module_type == FOOTER
            or module_type not in MODULE_NAMES
            or not (0 <= row_group <= _ORDINAL_MAX and 0 <= column <= _ORDINAL_MAX)
            or (paged and (page is None or not 0 <= page <= _ORDINAL_MAX))
        ):
            module_aad(b"", module_type, row_group, column, page)  # raises what is wrong
            raise ValueError("the footer's AAD has no ordinals: module_aad makes it")
        if paged:
            _TYPE_AND_THREE_ORDINALS.pack_into(
                self._buf, self._at, module_type, row_group, column, page
            )
            return self._view
        _TYPE_AND_TWO_ORDINALS.pack_into(self._buf, self._at, module_type, row_group, column)
        return self._two


class FilterAads:
    """The AADs of a file's Bloom filter modules (4.4.2: the header's, module type 8, and the
    bitset's, 9), for a reader opening thousands of filters: the file AAD and each module
    type joined once, only the ordinals packed per filter."""

    __slots__ = ("_bitset", "_header")

    def __init__(self, file_aad: bytes) -> None:
        self._header = file_aad + bytes([BLOOM_FILTER_HEADER])
        self._bitset = file_aad + bytes([BLOOM_FILTER_BITSET])

    def of(self, row_group: int, column: int) -> tuple[bytes, bytes]:
        """The header's and the bitset's AAD of the filter of (``row_group``, ``column``),
        ordinals checked as :func:`module_aad` checks them (the same error)."""
        if not (0 <= row_group <= _ORDINAL_MAX and 0 <= column <= _ORDINAL_MAX):
            module_aad(b"", BLOOM_FILTER_HEADER, row_group, column)  # raises what is wrong
        ordinals = _TWO_ORDINALS.pack(row_group, column)
        return self._header + ordinals, self._bitset + ordinals


_TWO_ORDINALS = struct.Struct("<hh")
_MODULE_TYPES = {module_type: bytes([module_type]) for module_type in MODULE_NAMES}  # 1 byte


class PageAads:
    """The AADs of one column chunk's page modules (4.4.2), for a walk over its pages: its
    dictionary page's header and body (no page ordinal), made once; each data page's header
    and body from the parts that do not change, joined once. The row group and column
    ordinals are checked once, as :func:`module_aad` checks them; each page ordinal when its
    AADs are made."""

    __slots__ = ("_data_header", "_data_page", "dictionary")

    def __init__(self, file_aad: bytes, row_group: int, column: int) -> None:
        if not (0 <= row_group <= _ORDINAL_MAX and 0 <= column <= _ORDINAL_MAX):
            module_aad(file_aad, DATA_PAGE_HEADER, row_group, column, 0)  # raises what is wrong
        ordinals = _TWO_ORDINALS.pack(row_group, column)
        # (header, body) of the dictionary page
        self.dictionary = (
            file_aad + _MODULE_TYPES[DICTIONARY_PAGE_HEADER] + ordinals,
            file_aad + _MODULE_TYPES[DICTIONARY_PAGE] + ordinals,
        )
        self._data_header = file_aad + _MODULE_TYPES[DATA_PAGE_HEADER] + ordinals
        self._data_page = file_aad + _MODULE_TYPES[DATA_PAGE] + ordinals

    def data_page(self, ordinal: int) -> tuple[bytes, bytes]:
        """The AADs of the header and the body of data page ``ordinal`` (the chunk's data
        pages from 0)."""
        if not 0 <= ordinal <= _ORDINAL_MAX:
            module_aad(b"", DATA_PAGE_HEADER, 0, 0, ordinal)  # raises what is wrong
        page = _ORDINAL.pack(ordinal)
        return self._data_header + page, self._data_page + page


_ORDINAL = struct.Struct("<h")


def check_key(key: Any, what: str) -> bytes:
    """``key`` as bytes, checked to be an AES key (16, 24 or 32 bytes); a ValueError naming
    ``what`` otherwise (a caller's key: misuse, not bad data)."""
    if isinstance(key, bytearray | memoryview):
        key = bytes(key)
    if not isinstance(key, bytes):
        raise TypeError(f"{what} must be bytes, not {type(key).__name__}")
    if len(key) not in KEY_SIZES:
        raise ValueError(
            f"{what} is {len(key)} bytes; AES keys are 16, 24 or 32 bytes (128, 192, 256 bits)"
        )
    return key


def module_length(prefix: bytes | memoryview, *, available: int, module_type: int) -> int:
    """The length in a module's 4-byte prefix, checked against the ``available`` bytes after
    the prefix (what the file holds there) and the GCM overhead: a CorruptFileError otherwise.

    Nothing may be allocated from this length before that check: it is not authenticated."""
    if len(prefix) < LENGTH_SIZE:
        raise CorruptFileError(
            f"truncated encrypted {MODULE_NAMES[module_type]}: {len(prefix)} bytes, "
            f"its length prefix alone takes {LENGTH_SIZE}"
        )
    (length,) = struct.unpack_from("<I", prefix)
    if length < GCM_OVERHEAD:
        raise CorruptFileError(
            f"encrypted {MODULE_NAMES[module_type]} of {length} bytes cannot hold a nonce and a "
            f"tag ({GCM_OVERHEAD} bytes)"
        )
    if length > available:
        raise CorruptFileError(
            f"encrypted {MODULE_NAMES[module_type]} claims {length} bytes, only {available} "
            "follow in the file"
        )
    return int(length)


def _aesgcm(key: bytes) -> Any:
    aead = require("cryptography.hazmat.primitives.ciphers.aead", "reading encrypted Parquet files")
    return aead.AESGCM(key)


class Gcm:
    """One key's AES-GCM, set up once for all the modules it opens or seals (setting up an
    AESGCM costs as much as decrypting a small module). Holds the key, as the caller does;
    nothing decrypted is kept."""

    __slots__ = ("_aead", "key")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._aead = _aesgcm(key)

    def decrypt(
        self, buf: bytes | memoryview, aad: bytes | memoryview, *, module_type: int
    ) -> bytes:
        """:func:`decrypt_gcm` with this key."""
        data = memoryview(buf)
        if len(data) < GCM_OVERHEAD:
            raise CorruptFileError(
                f"encrypted {MODULE_NAMES[module_type]} of {len(data)} bytes cannot hold a "
                f"nonce and a tag ({GCM_OVERHEAD} bytes)"
            )
        try:
            plain = self._aead.decrypt(data[:NONCE_SIZE], data[NONCE_SIZE:], aad)
        except _invalid_tag():
            raise _refused(module_type) from None
        return plain if isinstance(plain, bytes) else bytes(plain)

    def try_decrypt(self, module: memoryview, aad: bytes) -> bytes | None:
        """``module`` (``nonce | ciphertext | tag``) decrypted, or None when it is too short
        or its tag does not verify: for a caller that, on None, opens the module again with
        :meth:`decrypt`, which says why (a tag that fails costs a frame, one that verifies
        nothing more than the decryption)."""
        if len(module) < GCM_OVERHEAD:
            return None
        try:
            plain = self._aead.decrypt(module[:NONCE_SIZE], module[NONCE_SIZE:], aad)
        except _invalid_tag():
            return None
        return plain if isinstance(plain, bytes) else bytes(plain)

    def try_decrypt_into(self, module: memoryview, aad: bytes, out: Any) -> bool:
        """:meth:`try_decrypt` into ``out`` (a writable contiguous byte buffer: a bytearray, a
        1-D uint8 array), which takes exactly the plaintext (the module less nonce and tag);
        whether it verified. When it did not, ``out`` holds nothing to use (possibly
        unauthenticated bytes): the caller drops it."""
        if len(module) < GCM_OVERHEAD or len(out) != len(module) - GCM_OVERHEAD:
            return False
        into = getattr(self._aead, "decrypt_into", None)
        if into is None:  # cryptography before decrypt_into: decrypt, then copy
            plain = self.try_decrypt(module, aad)
            if plain is None:
                return False
            memoryview(out).cast("B")[:] = plain
            return True
        try:
            into(module[:NONCE_SIZE], module[NONCE_SIZE:], aad, out)
        except _invalid_tag():
            return False
        return True

    def open_at(
        self, data: memoryview, at: int, aad: bytes | bytearray, *, module_type: int
    ) -> tuple[bytes, int]:
        """The GCM module serialized at ``at`` in ``data`` (5.1: ``length | nonce | ciphertext
        | tag``), decrypted, and where the next module begins: the module a run of modules
        (a chunk's pages) holds at ``at``, in one call. Its length prefix is checked against
        the bytes ``data`` holds after it before anything is sliced by it (CorruptFileError,
        as :func:`module_length`), the tag as :meth:`decrypt` checks it."""
        start = at + LENGTH_SIZE
        available = len(data) - start
        if available < 0:
            module_length(data[at:], available=0, module_type=module_type)  # raises: cut
        (length,) = _LENGTH.unpack_from(data, at)
        if not GCM_OVERHEAD <= length <= available:
            module_length(data[at:start], available=available, module_type=module_type)
            raise AssertionError("module_length accepts what open_at refused")
        nonce_end = start + NONCE_SIZE
        end = start + length
        try:
            plain = self._aead.decrypt(data[start:nonce_end], data[nonce_end:end], aad)
        except _invalid_tag():
            raise _refused(module_type) from None
        return plain, end

    def open_pair(
        self, data: memoryview, at: int, first_aad: bytes, second_aad: bytes
    ) -> tuple[bytes, bytes, int] | None:
        """The two GCM modules serialized one after the other at ``at`` in ``data`` (a page's
        header and body), decrypted, and where the next module begins; None when either is
        cut, claims more bytes than ``data`` holds after it (checked before anything is sliced
        by it) or fails its tag: the caller then opens them one by one with :meth:`open_at`,
        which says which and why. A page in one call and no Python between its two modules."""
        end = len(data)
        start = at + LENGTH_SIZE
        if start > end:
            return None
        (length,) = _LENGTH.unpack_from(data, at)
        middle = start + length
        second = middle + LENGTH_SIZE
        if length < GCM_OVERHEAD or second > end:
            return None
        (length,) = _LENGTH.unpack_from(data, middle)
        stop = second + length
        if length < GCM_OVERHEAD or stop > end:
            return None
        decrypt = self._aead.decrypt
        try:
            first = decrypt(
                data[start : start + NONCE_SIZE], data[start + NONCE_SIZE : middle], first_aad
            )
            last = decrypt(
                data[second : second + NONCE_SIZE], data[second + NONCE_SIZE : stop], second_aad
            )
        except _invalid_tag():
            return None
        return first, last, stop

    def seal_pair(
        self,
        first: bytes | memoryview,
        first_aad: bytes,
        second: bytes | memoryview,
        second_aad: bytes,
        nonces: bytes,
    ) -> memoryview:
        """Two modules (:meth:`seal`) one after the other in one buffer, each encrypted in
        place rather than copied: a new Bloom filter's header and bitset. ``nonces``: two
        fresh nonces, back to back (:meth:`Nonces.take`)."""
        if len(nonces) != 2 * NONCE_SIZE:
            raise ValueError(
                f"seal_pair takes two {NONCE_SIZE}-byte nonces, not {len(nonces)} bytes"
            )
        size = len(first)
        middle = LENGTH_SIZE + GCM_OVERHEAD + size  # sealed_size(size)
        out = bytearray(middle + LENGTH_SIZE + GCM_OVERHEAD + len(second))
        view = memoryview(out)
        encrypt = self._aead.encrypt_into
        nonce = nonces[:NONCE_SIZE]
        _SEALED_HEAD.pack_into(out, 0, NONCE_SIZE + size + TAG_SIZE, nonce)
        encrypt(nonce, first, first_aad, view[LENGTH_SIZE + NONCE_SIZE : middle])
        nonce = nonces[NONCE_SIZE : 2 * NONCE_SIZE]
        _SEALED_HEAD.pack_into(out, middle, NONCE_SIZE + len(second) + TAG_SIZE, nonce)
        encrypt(nonce, second, second_aad, view[middle + LENGTH_SIZE + NONCE_SIZE :])
        return view

    def seal(self, plain: bytes | memoryview, aad: bytes, nonce: bytes) -> bytes:
        """One module as 5.1 serializes it, ``length | nonce | ciphertext | tag``, under
        ``nonce`` (12 random bytes, never reused with this key: :class:`Nonces`)."""
        sealed = self._aead.encrypt(nonce, plain, aad)
        return b"".join((_LENGTH.pack(NONCE_SIZE + len(sealed)), nonce, sealed))


_LENGTH = struct.Struct("<I")
_SEALED_HEAD = struct.Struct("<I12s")  # a GCM module's length prefix and nonce (5.1)


def sealed_size(size: int) -> int:
    """The bytes a GCM module of ``size`` plaintext bytes takes in a file (5.1)."""
    return LENGTH_SIZE + GCM_OVERHEAD + size


def _refused(module_type: int) -> DecryptionError:
    name = MODULE_NAMES[module_type]
    return DecryptionError(
        f"the {name} does not decrypt (GCM tag mismatch): a wrong key or AAD prefix, "
        "or tampered bytes",
        module=name,
    )


def _invalid_tag() -> type[Exception]:
    from cryptography.exceptions import InvalidTag

    return InvalidTag


class Nonces:
    """Fresh random 12-byte nonces (4.1.3), drawn from the OS's CSPRNG many at a time (a
    system call for each of 20,000 modules costs more than encrypting them). One per
    writer, never shared across a fork, so no two processes hand out the same bytes; not
    thread-safe (a writer used from several threads takes a lock around it)."""

    _BATCH = 1024

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def __call__(self) -> bytes:
        return self.take(1)

    def take(self, count: int) -> bytes:
        """``count`` nonces, back to back."""
        size = NONCE_SIZE * count
        if self._at + size > len(self._pool):
            self._pool = os.urandom(NONCE_SIZE * max(count, self._BATCH))
            self._at = 0
        at = self._at
        self._at = at + size
        return self._pool[at : at + size]


def decrypt_gcm(
    buf: bytes | memoryview, key: bytes | Gcm, aad: bytes, *, module_type: int
) -> bytes:
    """Decrypt one GCM module: ``buf`` is ``nonce | ciphertext | tag`` (the bytes after the
    length prefix). A wrong key, AAD or tampered bytes fail the tag: DecryptionError. The
    ciphertext is read where it lies (a view), not copied. ``key``: the key, or its
    :class:`Gcm` when it opens many modules."""
    gcm = key if isinstance(key, Gcm) else Gcm(key)
    return gcm.decrypt(buf, aad, module_type=module_type)


def encrypt_gcm(plain: bytes | memoryview, key: bytes | Gcm, aad: bytes) -> bytes:
    """One GCM module as 5.1 serializes it: ``length | nonce | ciphertext | tag``, with a
    fresh random nonce (4.1.3: a nonce is never reused with a key)."""
    gcm = key if isinstance(key, Gcm) else Gcm(key)
    return gcm.seal(plain, aad, os.urandom(NONCE_SIZE))


def sign_footer(footer: bytes, key: bytes, aad: bytes) -> bytes:
    """The 28-byte signature (nonce | tag) of a plaintext footer (5.5)."""
    nonce = os.urandom(NONCE_SIZE)
    return nonce + bytes(_aesgcm(key).encrypt(nonce, footer, aad)[-TAG_SIZE:])


def decrypt_ctr(buf: bytes | memoryview, key: bytes, *, module_type: int) -> bytes:
    """Decrypt one CTR module (a page under AES_GCM_CTR_V1, 4.2.2): ``buf`` is
    ``nonce | ciphertext`` (after the length prefix), the counter block the nonce then
    ``00 00 00 01``. CTR authenticates nothing: a page's integrity rests on its GCM header."""
    data = memoryview(buf)
    if len(data) < NONCE_SIZE:
        raise CorruptFileError(
            f"encrypted {MODULE_NAMES[module_type]} of {len(data)} bytes cannot hold a nonce "
            f"({NONCE_SIZE} bytes)"
        )
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    counter = bytes(data[:NONCE_SIZE]) + b"\x00\x00\x00\x01"
    decryptor = Cipher(algorithms.AES(key), modes.CTR(counter)).decryptor()
    return bytes(decryptor.update(data[NONCE_SIZE:]) + decryptor.finalize())


def verify_footer_signature(footer: bytes, signature: bytes, key: bytes, aad: bytes) -> bool:
    """Whether ``signature`` (nonce | tag, 28 bytes) signs the plaintext ``footer`` with
    ``key`` and the footer ``aad`` (Encryption.md 5.5)."""
    if len(signature) != SIGNATURE_SIZE:
        return False
    nonce, tag = signature[:NONCE_SIZE], signature[NONCE_SIZE:]
    computed = _aesgcm(key).encrypt(nonce, footer, aad)[-TAG_SIZE:]
    return hmac.compare_digest(computed, tag)
