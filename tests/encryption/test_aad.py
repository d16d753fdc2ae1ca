"""The module AADs against the reference packing in ``reference.py`` (Encryption.md 4.4.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom._crypto import cipher
from parquet_bloom.errors import DecryptionError
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


@given(
    st.binary(max_size=40),
    st.lists(st.tuples(st.sampled_from(range(1, 10)), ordinals, ordinals, ordinals), max_size=8),
)
def test_aads_built_in_place_match_the_reference(
    file_aad: bytes, modules: list[tuple[int, int, int, int]]
) -> None:
    """One buffer, one module after another (as the filter reads and the page decryption use
    it): each AAD as the reference packs it, whatever came before."""
    aads = cipher.AadBuffer(file_aad)
    for module, rg, col, page in modules:
        ordinal = page if module in (cipher.DATA_PAGE, cipher.DATA_PAGE_HEADER) else None
        assert bytes(aads.of(module, rg, col, ordinal)) == reference.aad(
            file_aad, module, rg, col, ordinal
        )


def test_aads_built_in_place_are_checked_as_module_aad_checks_them() -> None:
    aads = cipher.AadBuffer(b"aad")
    with pytest.raises(DecryptionError, match="row group ordinal 32768"):
        aads.of(cipher.BLOOM_FILTER_HEADER, 0x8000, 0)
    with pytest.raises(DecryptionError, match="page ordinal -1"):
        aads.of(cipher.DATA_PAGE, 0, 0, -1)
    with pytest.raises(ValueError, match="needs a page ordinal"):
        aads.of(cipher.DATA_PAGE_HEADER, 0, 0)
    with pytest.raises(ValueError, match="footer"):
        aads.of(cipher.FOOTER, 0, 0)


@given(st.binary(max_size=40), ordinals, ordinals)
def test_filter_aads_match_the_reference(file_aad: bytes, rg: int, col: int) -> None:
    header, bitset = cipher.FilterAads(file_aad).of(rg, col)
    assert header == reference.aad(file_aad, cipher.BLOOM_FILTER_HEADER, rg, col, None)
    assert bitset == reference.aad(file_aad, cipher.BLOOM_FILTER_BITSET, rg, col, None)


def test_filter_aads_are_checked_as_module_aad_checks_them() -> None:
    aads = cipher.FilterAads(b"aad")
    with pytest.raises(DecryptionError, match="row group ordinal 32768"):
        aads.of(0x8000, 0)
    with pytest.raises(DecryptionError, match="column ordinal -1"):
        aads.of(0, -1)


@given(st.binary(max_size=40), ordinals, ordinals, st.lists(ordinals, max_size=6))
def test_a_chunk_s_page_aads_match_the_reference(
    file_aad: bytes, rg: int, col: int, pages: list[int]
) -> None:
    """The AADs a chunk's page walk uses (``PageAads``): the dictionary page's fixed, each data
    page's header and body made from its ordinal, whatever page came before."""
    aads = cipher.PageAads(file_aad, rg, col)
    assert aads.dictionary == (
        reference.aad(file_aad, cipher.DICTIONARY_PAGE_HEADER, rg, col, None),
        reference.aad(file_aad, cipher.DICTIONARY_PAGE, rg, col, None),
    )
    for page in pages:
        header, body = aads.data_page(page)
        assert header == reference.aad(file_aad, cipher.DATA_PAGE_HEADER, rg, col, page)
        assert body == reference.aad(file_aad, cipher.DATA_PAGE, rg, col, page)


def test_a_chunk_s_page_aads_are_checked_as_module_aad_checks_them() -> None:
    with pytest.raises(DecryptionError, match="column ordinal 32768"):
        cipher.PageAads(b"aad", 0, 0x8000)
    with pytest.raises(DecryptionError, match="row group ordinal -1"):
        cipher.PageAads(b"aad", -1, 0)
    aads = cipher.PageAads(b"aad", 0, 0)
    with pytest.raises(DecryptionError, match="page ordinal 32768"):
        aads.data_page(0x8000)
