"""Codecs for the parts of a Parquet file this library reads or writes.

Bytes in, typed structs out, and back: the footer (:mod:`.footer`, its schema in
:mod:`.schema`), the Bloom filter header (:mod:`.bloom_header`), page headers
(:mod:`.page_header`) and the OffsetIndex (:mod:`.offset_index`), all Thrift compact
(:mod:`._compact`). There is no IO here: every function takes bytes or structs, and callers
read the bytes (locally, over fsspec, from a cache) and hand them in.

This is the only package that imports the generated Thrift bindings
(``parquet_bloom._thrift``), so the rest of the library depends on a small, typed surface
instead of on generated code, and the Thrift runtime's many exception types are turned into
this library's errors in one place. Everything here treats its input as untrusted: every
decode failure surfaces as ``CorruptFileError``.
"""

from parquet_bloom._format.bloom_header import (
    MAX_BLOOM_FILTER_HEADER_SIZE,
    BloomFilterHeader,
    encode_bloom_filter_header,
    parse_bloom_filter_header,
)
from parquet_bloom._format.footer import (
    FOOTER_TRAILER_SIZE,
    MAGIC,
    MAX_FOOTER_SIZE,
    ColumnChunk,
    ColumnChunkInfo,
    ColumnCryptoMetaData,
    ColumnMetaData,
    CompressionCodec,
    EncryptionAlgorithm,
    EncryptionWithColumnKey,
    EncryptionWithFooterKey,
    FileCryptoMetaData,
    FileMetaData,
    FooterView,
    chunk_start,
    column_chunks,
    decode_column_metadata,
    decode_file_crypto_metadata,
    decode_file_metadata,
    decode_footer_encryption,
    encode_column_metadata,
    encode_file_crypto_metadata,
    encode_file_metadata,
    parse_footer_trailer,
    with_column_metadata,
)
from parquet_bloom._format.offset_index import decode_offset_index, encode_offset_index
from parquet_bloom._format.page_header import (
    MAX_PAGE_HEADER_SIZE,
    Encoding,
    PageHeader,
    PageType,
    encode_page_header,
    parse_page_header,
)
from parquet_bloom._format.schema import (
    FieldRepetitionType,
    SchemaLeaf,
    Type,
    encoded_path,
    leaf_from_type_properties,
    leaf_type_properties,
    schema_leaves,
)

__all__ = [
    "FOOTER_TRAILER_SIZE",
    "MAGIC",
    "MAX_BLOOM_FILTER_HEADER_SIZE",
    "MAX_FOOTER_SIZE",
    "MAX_PAGE_HEADER_SIZE",
    "BloomFilterHeader",
    "ColumnChunk",
    "ColumnChunkInfo",
    "ColumnCryptoMetaData",
    "ColumnMetaData",
    "CompressionCodec",
    "Encoding",
    "EncryptionAlgorithm",
    "EncryptionWithColumnKey",
    "EncryptionWithFooterKey",
    "FieldRepetitionType",
    "FileCryptoMetaData",
    "FileMetaData",
    "FooterView",
    "PageHeader",
    "PageType",
    "SchemaLeaf",
    "Type",
    "chunk_start",
    "column_chunks",
    "decode_column_metadata",
    "decode_file_crypto_metadata",
    "decode_file_metadata",
    "decode_footer_encryption",
    "decode_offset_index",
    "encode_bloom_filter_header",
    "encode_column_metadata",
    "encode_file_crypto_metadata",
    "encode_file_metadata",
    "encode_offset_index",
    "encode_page_header",
    "encoded_path",
    "leaf_from_type_properties",
    "leaf_type_properties",
    "parse_bloom_filter_header",
    "parse_footer_trailer",
    "parse_page_header",
    "schema_leaves",
    "with_column_metadata",
]
