"""A reference reader of encrypted column chunks, written from Encryption.md alone.

It shares nothing with ``parquet_bloom._crypto``: AES-GCM straight from ``cryptography``, AADs
packed here from the spec's table (4.4.2), modules split as 5.1 lays them out. It reads the
pages of an uncompressed, PLAIN-encoded, required column chunk (what parquet-testing's Bloom
filter file holds) and returns its values: the oracle our decrypted filters must contain.
"""

from __future__ import annotations

import struct

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from parquet_bloom import _format as fmt

DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_HEADER = 2, 3, 4
PAGE_TYPES = {0: "DATA_PAGE", 2: "DICTIONARY_PAGE", 3: "DATA_PAGE_V2"}


def aad(file_aad: bytes, module: int, row_group: int, column: int, page: int | None) -> bytes:
    out = file_aad + bytes([module]) + struct.pack("<hh", row_group, column)
    return out if page is None else out + struct.pack("<h", page)


def gcm_module(data: bytes, at: int, key: bytes, module_aad: bytes) -> tuple[bytes, int]:
    """The plaintext of the GCM module at ``at`` and the offset after it."""
    (length,) = struct.unpack_from("<I", data, at)
    body = data[at + 4 : at + 4 + length]
    return AESGCM(key).decrypt(body[:12], body[12:], module_aad), at + 4 + length


def column_values(
    data: bytes,
    *,
    start: int,
    num_values: int,
    key: bytes,
    file_aad: bytes,
    row_group: int,
    column: int,
    dtype: str,
) -> np.ndarray:
    """The values of one encrypted, uncompressed, PLAIN, required column chunk."""
    values = []
    at, page, seen = start, 0, 0
    while seen < num_values:
        header_bytes, at = gcm_module(
            data, at, key, aad(file_aad, DATA_PAGE_HEADER, row_group, column, page)
        )
        header, _ = fmt.parse_page_header(header_bytes)
        kind = PAGE_TYPES.get(header.type)
        assert kind in ("DATA_PAGE", "DATA_PAGE_V2"), f"page type {header.type}"
        body, at = gcm_module(data, at, key, aad(file_aad, DATA_PAGE, row_group, column, page))
        if kind == "DATA_PAGE_V2":
            v2 = header.data_page_header_v2
            assert v2.encoding == 0 and v2.num_nulls == 0  # PLAIN, no nulls
            skip = v2.definition_levels_byte_length + v2.repetition_levels_byte_length
            count = v2.num_values
        else:
            v1 = header.data_page_header
            assert v1.encoding == 0
            skip, count = 0, v1.num_values
        values.append(np.frombuffer(body[skip:], dtype=dtype, count=count))
        seen += count
        page += 1
    return np.concatenate(values)
