"""The module AADs against the reference packing in ``reference.py`` (Encryption.md 4.4.2)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom._crypto import cipher
from tests.encryption import reference

ordinals = st.integers(min_value=0, max_value=0x7FFF)
modules = st.sampled_from(
    [
        cipher.COLUMN_META_DATA,
        cipher.DICTIONARY_PAGE,
        cipher.DICTIONARY_PAGE_HEADER,
        cipher.COLUMN_INDEX,
        cipher.OFFSET_INDEX,
        cipher.BLOOM_FILTER_HEADER,
        cipher.BLOOM_FILTER_BITSET,
    ]
)


@given(st.binary(max_size=40), modules, ordinals, ordinals)
def test_module_aads_match_the_reference(file_aad: bytes, module: int, rg: int, col: int) -> None:
    ours = cipher.module_aad(file_aad, module, rg, col)
    assert ours == reference.aad(file_aad, module, rg, col, None)


@given(st.binary(max_size=40), st.sampled_from([2, 4]), ordinals, ordinals, ordinals)
def test_page_aads_match_the_reference(
    file_aad: bytes, module: int, rg: int, col: int, page: int
) -> None:
    ours = cipher.module_aad(file_aad, module, rg, col, page)
    assert ours == reference.aad(file_aad, module, rg, col, page)
