"""Read a Parquet file's Bloom filters with as few reads as their placement allows.

Reading is split in two, as zarr's range coalescing and h11 are: pure functions *plan* the byte
ranges (from the footer's offsets and lengths, checked against the file's layout) and coalesce
them; :mod:`parquet_bloom._io` *executes* the plan against a local file, a file object or a
filesystem, and counts what it read.

- The footer costs one tail read, and a second only when it is longer than the first read.
- A filter whose ``bloom_filter_length`` is known costs one read, and filters that lie together
  (Arrow C++ and parquet-java write them all in one place) share one read.
- A filter without ``bloom_filter_length`` (files from before format 2.10) costs one guess read of
  ``GUESS_READ_SIZE`` bytes, clamped to the footer, and a second read only for the bitset bytes
  the guess did not cover.

This module is the reader: the footer, the column chunks and the filters asked for, and which
of them to load. The loads' reads are :mod:`parquet_bloom._filter_reads`'; an encrypted file's
footer, chunk metadata and filters are opened by :mod:`parquet_bloom._encrypted_reads`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom._crypto.file import FileDecryptor
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._encrypted_reads import (
    ChunkCiphers,
    EncryptedChunks,
    load_encrypted,
    open_footer,
)
from parquet_bloom._filter_reads import FilterReads
from parquet_bloom._io.ranges import ReadBuffer
from parquet_bloom._io.source import ByteSource, read_footer
from parquet_bloom._locate import FilterLocation, locate_encrypted_filter, locate_filter
from parquet_bloom._sbbf import FilterBlocks, SplitBlockBloomFilter, num_bytes_given_length
from parquet_bloom.errors import BloomFilterError


class BloomFilterWarning(UserWarning):
    """A Bloom filter could not be used; the row group was kept rather than risk losing rows."""


class BloomFilterReader:
    """The Bloom filters of one Parquet file.

    ``source`` is a path, a binary file object (``seek``/``read``; not closed by the reader), or a
    path on ``filesystem`` (an fsspec filesystem). The footer is read on construction:
    ``metadata`` (the decoded FileMetaData), ``schema_leaves`` (its primitive columns, in
    column order) and ``column_chunks``. ``reads`` and ``bytes_read`` count the reads made so far.
    """

    def __init__(
        self,
        source: Any,
        *,
        filesystem: Any | None = None,
        storage_options: Mapping[str, Any] | None = None,
        size: int | None = None,
        tail_size: int | None = None,
        decryption: DecryptionKeys | None = None,
    ) -> None:
        """``source``: a path, a URL (``s3://``, ``gs://``, ``abfs://``, ``https://``, any
        fsspec protocol, configured by ``storage_options``), a binary file object, or a path on
        ``filesystem`` (fsspec or pyarrow). ``size``, when known, saves the size lookup.

        ``tail_size``: how many bytes of the file's end the first read takes (default 64 KiB
        for a local file or a file object, 1 MiB on a filesystem: see docs/performance.md,
        "Tail reads"). Filters inside that tail cost no further read.

        ``decryption``: the keys of an encrypted file (:class:`parquet_bloom.DecryptionKeys`;
        docs/encryption.md). The filter of a column whose key is not among them is reported
        unreadable (a :class:`~parquet_bloom.errors.MissingKeyError`), never read."""
        if decryption is not None and not isinstance(decryption, DecryptionKeys):
            raise TypeError(f"decryption must be a DecryptionKeys, not {type(decryption).__name__}")
        self._source = ByteSource(
            source, filesystem=filesystem, storage_options=storage_options, size=size
        )
        self._storage_args = (source, filesystem, storage_options)
        self._decryptor: FileDecryptor | None = None
        self.encrypted_footer = False  # the file ends in PARE (read with decryption=)
        # An encrypted file's column chunks, decrypted when asked for: their row groups'
        # ordinals and their ciphers, or why they are unreadable.
        self._encrypted: EncryptedChunks | None = None
        self._ciphers: ChunkCiphers = {}
        self._unreadable: dict[tuple[int, str], BloomFilterError] = {}
        try:
            footer = read_footer(self._source, tail_size, encrypted=decryption is not None)
            footer_data = footer.data
            if decryption is not None:
                footer_data, self._decryptor, self.encrypted_footer = open_footer(
                    footer.data, footer.tail, decryption, self._storage_args
                )
            self._footer = fmt.FooterView(footer_data)
            self.footer_bytes = footer_data  # the FileMetaData, for readers of the whole
        except BloomFilterError as err:
            self._source.close()
            raise err.located(source=self._source.name) from err.__cause__
        except BaseException:
            self._source.close()
            raise
        self.footer_start = footer.start
        self.schema_leaves = self._footer.leaves
        if self._decryptor is not None:
            self._encrypted = EncryptedChunks(
                self._decryptor, self._footer, self.schema_leaves, self._source.name
            )
            self._ciphers = self._encrypted.ciphers
            self._unreadable = self._encrypted.unreadable
        self._leaves = {leaf.path: leaf for leaf in self.schema_leaves}
        self._metadata: fmt.FileMetaData | None = None
        self._column_chunks: list[fmt.ColumnChunkInfo] | None = None
        # Bytes read that may hold filters: the tail read's bytes before the footer (writers
        # that put their filters just before it are served from there, with no further read),
        # and guess reads (filters of unknown length), which often cover their neighbours.
        held = ReadBuffer()
        if footer.tail_start < footer.start:
            held.add(footer.tail_start, footer.tail[: footer.start - footer.tail_start])
        self._reads = FilterReads(self._source, footer.start, held)

    @property
    def metadata(self) -> fmt.FileMetaData:
        """The decoded FileMetaData (the fields a Bloom filter reader needs; decoded on first
        use, every row group)."""
        if self._metadata is None:
            for rg in range(self.num_row_groups):
                self._row_group_chunks(rg)  # a corrupt row group: a located error
            self._metadata = self._footer.metadata()
        return self._metadata

    @property
    def column_chunks(self) -> list[fmt.ColumnChunkInfo]:
        """Every column chunk, in (row group, column) order (made on first use: a reader that
        needs a few asks :meth:`column_chunk`)."""
        if self._column_chunks is None:
            self._column_chunks = [
                c for rg in range(self.num_row_groups) for c in self._row_group_chunks(rg)
            ]
        return self._column_chunks

    # -- encryption -----------------------------------------------------------------------------

    @property
    def encryption_algorithm(self) -> str | None:
        """ "AES_GCM_V1" or "AES_GCM_CTR_V1" for an encrypted file opened with ``decryption=``
        (None otherwise)."""
        return None if self._decryptor is None else self._decryptor.algorithm

    def unreadable_columns(self, row_group: int) -> dict[str, BloomFilterError]:
        """The encrypted column chunks of a row group that cannot be read with the keys given,
        and why (a :class:`~parquet_bloom.errors.MissingKeyError` for a key not given, a
        :class:`~parquet_bloom.errors.DecryptionError` for a wrong one)."""
        self.row_group(row_group)
        return {column: err for (rg, column), err in self._unreadable.items() if rg == row_group}

    def footer_decryption(self) -> tuple[bytes, bytes | None] | None:
        """For a file with an encrypted footer, its footer key and the AAD prefix the keys
        supply (for pyarrow's decryption properties, which read its plaintext columns); None
        otherwise, or when the footer key is unknown."""
        if self._decryptor is None or not self.encrypted_footer:
            return None
        key = self._decryptor.footer_key()
        return None if key is None else (key, self._decryptor.keys.aad_prefix)

    # -- counters and lifetime ------------------------------------------------------------------

    @property
    def reads(self) -> int:
        return self._source.reads

    @property
    def bytes_read(self) -> int:
        return self._source.bytes_read

    @property
    def size(self) -> int:
        """The file's size in bytes (known once the footer is read)."""
        return self._source.size

    @property
    def requests(self) -> int:
        """Requests made so far: reads, and a size lookup when one was needed."""
        return self._source.requests

    @property
    def num_row_groups(self) -> int:
        return self._footer.num_row_groups

    @property
    def schema_key(self) -> bytes | None:
        """The footer's bytes but its row groups and row count: files with the same key have
        the same schema and key-value metadata (None when not known)."""
        return self._footer.schema_key

    @property
    def columns(self) -> list[str]:
        """The dotted paths of the file's leaf columns."""
        return list(self._leaves)

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> BloomFilterReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"BloomFilterReader({self._source.name!r}, row_groups={self.num_row_groups}, "
            f"columns={len(self._leaves)})"
        )

    # -- filters --------------------------------------------------------------------------------

    def column_chunk(self, row_group: int, column: str) -> fmt.ColumnChunkInfo:
        """The footer's facts about one column chunk."""
        self._check_column(column)
        if not 0 <= row_group < self.num_row_groups:
            raise IndexError(
                f"row group {row_group} out of range: {self._source.name} has "
                f"{self.num_row_groups} row groups"
            )
        return self._chunk(row_group, column)

    def row_group(self, row_group: int) -> list[fmt.ColumnChunkInfo]:
        """One row group's column chunks, in column order (decoded on first use)."""
        if not 0 <= row_group < self.num_row_groups:
            raise IndexError(
                f"row group {row_group} out of range: {self._source.name} has "
                f"{self.num_row_groups} row groups"
            )
        return self._row_group_chunks(row_group)

    def _chunk(self, row_group: int, column: str) -> fmt.ColumnChunkInfo:
        j = self._leaves[column].column_index
        try:
            if self._encrypted is not None:  # its metadata decrypted, its key found
                return self._encrypted.chunk(row_group, j)
            return self._footer.chunk(row_group, j)
        except BloomFilterError as err:
            raise err.located(source=self._source.name) from err.__cause__

    def compressed_size(self, row_group: int) -> int:
        """One row group's column chunks' ``total_compressed_size`` (checked as
        :meth:`row_group` checks them)."""
        if not 0 <= row_group < self.num_row_groups:
            raise IndexError(
                f"row group {row_group} out of range: {self._source.name} has "
                f"{self.num_row_groups} row groups"
            )
        try:
            return self._footer.compressed_size(row_group)
        except BloomFilterError as err:
            raise err.located(source=self._source.name) from err.__cause__

    def _row_group_chunks(self, row_group: int) -> list[fmt.ColumnChunkInfo]:
        """A row group's column chunks, decoded and checked on first use: a corrupt footer
        entry is a located error then."""
        try:
            chunks = self._footer.chunks(row_group)
        except BloomFilterError as err:
            raise err.located(source=self._source.name) from err.__cause__
        if self._encrypted is None:
            return chunks
        try:
            return self._encrypted.row_group(row_group, chunks)
        except BloomFilterError as err:
            raise err.located(source=self._source.name) from err.__cause__

    def filter(self, row_group: int, column: str) -> SplitBlockBloomFilter | None:
        """The filter of one column chunk, or None when it has none.

        Raises a :class:`BloomFilterError` subclass when the filter is there but unusable.
        """
        chunk = self.column_chunk(row_group, column)
        filters, failed = self._load([chunk])
        if failed:
            raise failed[(row_group, column)]
        return filters[(row_group, column)]

    def filters(
        self,
        columns: Iterable[str] | None = None,
        row_groups: Iterable[int] | None = None,
        *,
        errors: str = "raise",
    ) -> dict[tuple[int, str], SplitBlockBloomFilter]:
        """Every filter present among the given columns and row groups (default: all), keyed by
        ``(row_group, column)``, read with coalesced reads.

        ``errors="raise"`` raises the first unusable filter's error; ``errors="warn"`` leaves
        unusable filters out with a :class:`BloomFilterWarning` each. To have the errors
        themselves, use :meth:`filters_with_errors`.
        """
        if errors not in ("raise", "warn"):
            raise ValueError(f'errors must be "raise" or "warn", not {errors!r}')
        filters, failed = self.filters_with_errors(columns, row_groups)
        for err in failed.values():
            if errors == "raise":
                raise err
            _warn(err)
        return filters

    def filters_with_errors(
        self, columns: Iterable[str] | None = None, row_groups: Iterable[int] | None = None
    ) -> tuple[
        dict[tuple[int, str], SplitBlockBloomFilter], dict[tuple[int, str], BloomFilterError]
    ]:
        """The usable filters among the given columns and row groups, and the error of each
        unusable one, both keyed by ``(row_group, column)``; nothing is raised or warned.

        One bad filter does not spoil the others: when a coalesced read fails, its parts are
        read one by one.
        """
        wanted_columns = None if columns is None else set(columns)
        for column in wanted_columns or ():
            self._check_column(column)
        wanted_groups = None if row_groups is None else set(row_groups)
        groups = range(self.num_row_groups)
        chunks = [
            c
            for rg in (groups if wanted_groups is None else sorted(wanted_groups & set(groups)))
            for c in self._row_group_chunks(rg)
            if wanted_columns is None or c.path in wanted_columns
        ]
        filters, failed = self._load(chunks)
        return {k: f for k, f in filters.items() if f is not None}, failed

    def row_groups_might_contain(self, column: str, values: Any) -> list[int]:
        """The row groups whose filter for ``column`` might contain any of ``values`` (IN).

        Literals are encoded as the column stores them, through its physical and logical type
        (see :func:`parquet_bloom._logical.literal_probe`): a literal the column cannot hold
        matches nothing, and one that cannot be probed safely (NaN, None, a BOOLEAN column) keeps
        every row group. A row group without a filter, or whose filter cannot be read, is kept
        (with a :class:`BloomFilterWarning` for the latter): pruning must never drop a row group
        that holds a value.
        """
        probe = logical.literal_probe(values, self._check_column(column))
        everything = list(range(self.num_row_groups))
        if probe.always_keep:
            return everything
        if probe.hashes.size == 0:
            return []
        chunks = [self._chunk(rg, column) for rg in everything]
        filters, failed = self._load(chunks)
        for err in failed.values():
            _warn(err)
        kept = []
        for rg in everything:
            f = filters.get((rg, column))
            if f is None or probe.keeps(f):
                kept.append(rg)
        return kept

    def filter_blocks(
        self, hashes: Mapping[str, Sequence[int]], row_groups: Iterable[int]
    ) -> tuple[
        dict[tuple[int, str], SplitBlockBloomFilter | FilterBlocks],
        dict[tuple[int, str], BloomFilterError],
    ]:
        """For each column of ``hashes`` and each of ``row_groups``, what probing those hashes
        needs of the column chunk's filter: its blocks that the hashes fall in
        (:class:`FilterBlocks`, or the whole filter where this reader holds it already), keyed
        by ``(row_group, column)`` (chunks without a filter left out); and the error of each
        unusable filter. A point lookup reads a header and a block of 32 bytes a hash, never
        a whole bitset, with the same checks as :meth:`filters_with_errors`.

        Reads: nothing for a filter the tail read holds. Where the footer gives
        ``bloom_filter_length``, the header and the blocks, of every filter at once, in
        coalesced reads (the header's length is the length less the bitset's, the largest
        power of two below it; checked against the header). Without it, the guess read of
        :meth:`filters_with_errors`, which tells the header, then the blocks it missed.
        """
        for column in hashes:
            self._check_column(column)
        if self._decryptor is not None:
            # An encrypted file: a filter module is decrypted whole (GCM authenticates the
            # module, not a block of it), so the whole filters, as filters_with_errors reads.
            decrypted, undecrypted = self.filters_with_errors(list(hashes), row_groups)
            return dict(decrypted), undecrypted
        out: dict[tuple[int, str], SplitBlockBloomFilter | FilterBlocks] = {}
        failed: dict[tuple[int, str], BloomFilterError] = {}
        name = self._source.name
        footer_start = self.footer_start
        todo: list[tuple[FilterLocation, list[int], int | None]] = []
        for rg in row_groups:
            for column, wanted in hashes.items():
                chunk = self._chunk(rg, column)
                key = (rg, column)
                if key in self._reads.cache:
                    cached = self._reads.cache[key]
                    if cached is not None:
                        out[key] = cached
                    continue
                try:
                    location = locate_filter(chunk, footer_start=footer_start, source=name)
                except BloomFilterError as err:
                    failed[key] = err
                    continue
                if location is None:
                    self._reads.cache[key] = None
                    continue
                num_bytes = (
                    None if location.length is None else num_bytes_given_length(location.length)
                )
                todo.append((location, [int(h) for h in wanted], num_bytes))
        if not todo:
            return out, failed
        self._reads.load_blocks(todo, out, failed)
        return out, failed

    def _check_column(self, column: str) -> fmt.SchemaLeaf:
        if not isinstance(column, str):
            raise TypeError(f"column must be a dotted path string, not {type(column).__name__}")
        try:
            return self._leaves[column]
        except KeyError:
            raise ValueError(
                f"no column {column!r} in {self._source.name}; its columns are "
                f"{', '.join(map(repr, self._leaves))}"
            ) from None

    def _load(
        self, chunks: Sequence[fmt.ColumnChunkInfo]
    ) -> tuple[
        dict[tuple[int, str], SplitBlockBloomFilter | None], dict[tuple[int, str], BloomFilterError]
    ]:
        """Load filters (cached), reading what is missing in as few reads as possible.

        Returns the filters (None for a chunk without one) and the errors of unusable ones.
        """
        out: dict[tuple[int, str], SplitBlockBloomFilter | None] = {}
        failed: dict[tuple[int, str], BloomFilterError] = {}
        todo: list[FilterLocation] = []
        name = self._source.name
        encrypted: list[FilterLocation] = []
        for chunk in chunks:
            key = (chunk.row_group, chunk.path)
            if key in self._reads.cache:
                out[key] = self._reads.cache[key]
                continue
            if key in self._unreadable:
                failed[key] = self._unreadable[key]
                continue
            try:
                if (
                    chunk.encrypted
                    and (ciphers := self._ciphers.get(chunk.row_group)) is not None
                    and ciphers[1][chunk.column_index] is not None
                ):
                    location = locate_encrypted_filter(
                        chunk, footer_start=self.footer_start, source=name
                    )
                    if location is not None:
                        encrypted.append(location)
                        continue
                else:
                    location = locate_filter(chunk, footer_start=self.footer_start, source=name)
            except BloomFilterError as err:
                failed[key] = err
                continue
            if location is None:
                self._reads.cache[key] = out[key] = None
            else:
                todo.append(location)
        if encrypted:
            decryptor = self._decryptor
            assert decryptor is not None
            load_encrypted(self._reads, decryptor, self._ciphers, encrypted, out, failed)
        if not todo:
            return out, failed
        self._reads.load(todo, out, failed)
        return out, failed


def _warn(err: BloomFilterError) -> None:
    # stacklevel 3: the warning points at the caller of the public method.
    warnings.warn(
        f"{err}; the filter is ignored (its row group is kept)", BloomFilterWarning, stacklevel=3
    )
