"""The table-wide Bloom index: many row groups' filters, bit-sliced, in one Puffin file.

:mod:`.slices` (the bit slices, pure), :mod:`.entries` (which file and row group each bit is,
pure), :mod:`.puffin` (the container, pure), :mod:`.layout` (blob types and properties),
:mod:`.build` (files' filters -> an index file), :mod:`.lookup` (an index file -> candidates).
Public through :mod:`parquet_bloom.index`; docs/index.md describes the format.
"""
