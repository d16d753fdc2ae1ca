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
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from parquet_bloom import _format as fmt
from parquet_bloom import _logical as logical
from parquet_bloom._crypto import cipher
from parquet_bloom._crypto.file import FileDecryptor
from parquet_bloom._crypto.keys import DecryptionKeys
from parquet_bloom._format.footer import ENCRYPTED_MAGIC
from parquet_bloom._io.ranges import ByteRange, ReadBuffer, coalesce
from parquet_bloom._io.source import ByteSource, read_footer
from parquet_bloom._locate import (
    MAX_ENCRYPTED_HEADER_MODULE_SIZE,
    MODULE_PREFIX,
    FilterLocation,
    check_header,
    locate_encrypted_filter,
    locate_filter,
)
from parquet_bloom._sbbf import (
    BYTES_PER_BLOCK,
    FilterBlocks,
    SplitBlockBloomFilter,
    block_index,
    num_bytes_given_length,
)
from parquet_bloom.errors import (
    BloomFilterError,
    CorruptFileError,
    DecryptionError,
    FileReadError,
)

# Blocks of a local file's filter this close are read as one (a page: a smaller gap saves
# nothing); further apart, each is its own pread rather than copying the bytes between them.
BLOCK_READ_GAP = 4096


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
        # Encrypted column chunks: their key and row group ordinal, or why they are unreadable.
        self._chunk_keys: dict[tuple[int, str], tuple[bytes, int]] = {}
        self._unreadable: dict[tuple[int, str], BloomFilterError] = {}
        self._decrypted_groups: dict[int, list[fmt.ColumnChunkInfo]] = {}
        try:
            footer = read_footer(self._source, tail_size, encrypted=decryption is not None)
            footer_data = footer.data
            if decryption is not None:
                footer_data = self._open_encryption(footer.data, footer.tail, decryption)
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
        self._leaves = {leaf.path: leaf for leaf in self.schema_leaves}
        self._metadata: fmt.FileMetaData | None = None
        self._column_chunks: list[fmt.ColumnChunkInfo] | None = None
        self._cache: dict[tuple[int, str], SplitBlockBloomFilter | None] = {}
        # Bytes read that may hold filters: the tail read's bytes before the footer (writers
        # that put their filters just before it are served from there, with no further read),
        # and guess reads (filters of unknown length), which often cover their neighbours.
        self._held = ReadBuffer()
        if footer.tail_start < footer.start:
            self._held.add(footer.tail_start, footer.tail[: footer.start - footer.tail_start])

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

    def _open_encryption(self, data: bytes, tail: bytes, keys: DecryptionKeys) -> bytes:
        """The plaintext FileMetaData of a file read with keys: an encrypted footer decrypted,
        a plaintext footer of an encrypted file stripped of its signature (checked when the
        footer key is known); any other footer as it is."""
        from parquet_bloom._crypto.file import open_encrypted_footer, open_plaintext_footer

        sidecar = self._sidecar_reader()
        if tail[-len(ENCRYPTED_MAGIC) :] == ENCRYPTED_MAGIC:
            plain, self._decryptor = open_encrypted_footer(data, keys, sidecar=sidecar)
            self.encrypted_footer = True
            return plain
        if fmt.decode_footer_encryption(data).encryption_algorithm is None:
            if keys.allow_plaintext_files:
                return data  # not encrypted: the keys are not needed
            raise DecryptionError(
                "the file is not encrypted, but was to be read with keys (pass "
                "DecryptionKeys(allow_plaintext_files=True) to read plaintext files too)",
                module="footer",
            )
        footer, self._decryptor = open_plaintext_footer(data, keys, sidecar=sidecar)
        return footer

    def _sidecar_reader(self) -> Any:
        """A reader of this file's external key material (``_KEY_MATERIAL_FOR_<name>.json``
        next to it), for sources named by a path; None for file objects."""
        from parquet_bloom._crypto.keys import (
            MAX_KEY_MATERIAL_FILE_SIZE,
            external_key_material_name,
            parse_key_material_file,
        )

        source, filesystem, storage_options = self._storage_args
        if not isinstance(source, str | os.PathLike):
            return None
        text = os.fspath(source)
        if filesystem is None and "://" not in text:
            directory, name = os.path.split(text)
            sibling = os.path.join(directory, external_key_material_name(name))
        else:
            directory, _, name = text.rpartition("/")
            sibling = f"{directory}/{external_key_material_name(name)}"
        store: dict[str, bytes] | None = None

        def read(reference: str) -> bytes | None:
            nonlocal store
            if store is None:
                try:
                    with ByteSource(
                        sibling, filesystem=filesystem, storage_options=storage_options
                    ) as material:
                        if material.size > MAX_KEY_MATERIAL_FILE_SIZE:
                            raise DecryptionError(
                                f"key material file {sibling} of {material.size} bytes is too large"
                            )
                        data = material.read_exact(0, material.size)
                except FileNotFoundError:
                    raise DecryptionError(
                        f"the key material is stored outside the file, in {sibling}, which "
                        "is missing"
                    ) from None
                store = parse_key_material_file(data)
            return store.get(reference)

        return read

    def _decrypt_chunks(
        self, row_group: int, chunks: list[fmt.ColumnChunkInfo]
    ) -> list[fmt.ColumnChunkInfo]:
        """A row group's column chunks with the encrypted ones' keys found and their
        encrypted ColumnMetaData decrypted; those that cannot be are noted unreadable."""
        decryptor = self._decryptor
        assert decryptor is not None
        structs = self._footer.column_chunk_structs(row_group)
        ordinal = self._footer.row_group_ordinal(row_group)
        out = []
        for info, raw in zip(chunks, structs, strict=True):
            crypto = raw.crypto_metadata
            if crypto is None:
                out.append(info)
                continue
            try:
                key = decryptor.chunk_key(info.path, crypto)
                own_key = crypto.ENCRYPTION_WITH_COLUMN_KEY is not None
                if own_key and raw.encrypted_column_metadata is not None:
                    meta = decryptor.column_metadata(raw, key, ordinal, info.column_index)
                    info = fmt.with_column_metadata(
                        info, meta, self.schema_leaves[info.column_index]
                    )
                self._chunk_keys[(row_group, info.path)] = (key, ordinal)
            except BloomFilterError as err:
                self._unreadable[(row_group, info.path)] = err.located(
                    source=self._source.name, row_group=row_group, column=info.path
                )
            out.append(info)
        return out

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
        if self._decryptor is not None:
            # An encrypted file's chunks carry metadata decrypted with the row group's.
            return self._row_group_chunks(row_group)[self._leaves[column].column_index]
        try:
            return self._footer.chunk(row_group, self._leaves[column].column_index)
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
        if self._decryptor is None:
            return chunks
        found = self._decrypted_groups.get(row_group)
        if found is None:
            found = self._decrypted_groups[row_group] = self._decrypt_chunks(row_group, chunks)
        return found

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
                if key in self._cache:
                    cached = self._cache[key]
                    if cached is not None:
                        out[key] = cached
                    continue
                try:
                    location = locate_filter(chunk, footer_start=footer_start, source=name)
                except BloomFilterError as err:
                    failed[key] = err
                    continue
                if location is None:
                    self._cache[key] = None
                    continue
                num_bytes = (
                    None if location.length is None else num_bytes_given_length(location.length)
                )
                todo.append((location, [int(h) for h in wanted], num_bytes))
        if not todo:
            return out, failed

        def fail(loc: FilterLocation, err: BloomFilterError) -> None:
            _fail(failed, name, loc, err)

        buffer = self._held_copy()
        # The first reads: where the length is known, the header (the length less the
        # guessed bitset) and the guessed blocks; elsewhere the guess read.
        firsts: list[ByteRange] = []
        for loc, wanted, num_bytes in todo:
            if num_bytes is None:
                firsts.append(loc.first_read(footer_start))
                continue
            assert loc.length is not None
            bitset = loc.offset + loc.length - num_bytes
            firsts.append(ByteRange(loc.offset, loc.length - num_bytes))
            firsts.extend(_block_ranges(bitset, num_bytes, wanted).values())
        guessing = any(num_bytes is None for _, _, num_bytes in todo)
        # On a filesystem a request costs its round trip: header and blocks in one read. A
        # local file's reads cost a system call each: blocks apart are read apart.
        read_gap = self._source.max_gap if self._source.remote else BLOCK_READ_GAP
        unread = self._read_into(
            buffer,
            [gap for r in firsts for gap in buffer.missing(r)],
            keep=self._held if guessing else None,
            max_gap=read_gap,
        )

        # The headers, then the blocks the first reads did not cover (a wrong guess of the
        # header's length, filters of unknown length): one more coalesced read.
        parsed: list[tuple[FilterLocation, int, dict[int, ByteRange]]] = []
        for loc, wanted, num_bytes in todo:
            first = loc.first_read(footer_start)  # as filters_with_errors reads
            if num_bytes is not None:  # the header guessed
                first = ByteRange(loc.offset, first.length - num_bytes)
            if (unreadable := _overlapping(first, unread)) is not None:
                fail(loc, unreadable)
                continue
            limit = min(loc.first_read(footer_start).length, fmt.MAX_BLOOM_FILTER_HEADER_SIZE)
            try:
                header, header_len = fmt.parse_bloom_filter_header(
                    buffer.available(loc.offset, limit)
                )
                guessed = num_bytes is None or (
                    header.num_bytes == num_bytes and header_len + num_bytes == loc.length
                )
            except BloomFilterError as err:
                if num_bytes is None:  # the guess read held all a header may take
                    fail(loc, err)
                    continue
                guessed = False
            if not guessed:
                # Not the header guessed: read what filters_with_errors would have read of
                # it, and decode that (its error, if any, is the same).
                whole = ByteRange(loc.offset, limit)
                missed = self._read_into(buffer, buffer.missing(whole))
                if unreadable := _overlapping(whole, missed):
                    fail(loc, unreadable)
                    continue
                try:
                    header, header_len = fmt.parse_bloom_filter_header(buffer.get(whole))
                except BloomFilterError as err:
                    fail(loc, err)
                    continue
            try:
                check_header(header, header_len, loc, footer_start=footer_start, source=name)
            except BloomFilterError as err:
                fail(loc, err)
                continue
            parsed.append(
                (
                    loc,
                    header.num_bytes,
                    _block_ranges(loc.offset + header_len, header.num_bytes, wanted),
                )
            )
        blocks = [
            gap for _, _, ranges in parsed for r in ranges.values() for gap in buffer.missing(r)
        ]
        if blocks:
            unread.update(self._read_into(buffer, blocks, max_gap=read_gap))
        for loc, num_bytes, ranges in parsed:
            errors = (_overlapping(r, unread) for r in ranges.values())
            if unread and (unreadable := next((e for e in errors if e is not None), None)):
                fail(loc, unreadable)
                continue
            key = (loc.chunk.row_group, loc.chunk.path)
            out[key] = FilterBlocks(num_bytes, {b: buffer.get(r) for b, r in ranges.items()})
        return out, failed

    def _held_copy(self) -> ReadBuffer:
        """A buffer holding what the reader holds already (the tail before the footer, guess
        reads), for one load to add its reads to."""
        buffer = ReadBuffer()
        for offset, data in self._held.pieces():
            buffer.add(offset, data)
        return buffer

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
            if key in self._cache:
                out[key] = self._cache[key]
                continue
            if key in self._unreadable:
                failed[key] = self._unreadable[key]
                continue
            try:
                if chunk.encrypted and key in self._chunk_keys:
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
                self._cache[key] = out[key] = None
            else:
                todo.append(location)
        if encrypted:
            self._load_encrypted(encrypted, out, failed)
        if not todo:
            return out, failed

        def fail(loc: FilterLocation, err: BloomFilterError) -> None:
            _fail(failed, name, loc, err)

        buffer = self._held_copy()
        firsts = {id(loc): loc.first_read(self.footer_start) for loc in todo}
        guessing = any(loc.length is None for loc in todo)
        unread = self._read_into(
            buffer,
            [gap for r in firsts.values() for gap in buffer.missing(r)],
            keep=self._held if guessing else None,
        )

        # Headers tell how long each filter is; fetch the bitset bytes the guesses did not cover.
        parsed: list[tuple[FilterLocation, ByteRange]] = []
        for loc in todo:
            if unreadable := _overlapping(firsts[id(loc)], unread):
                fail(loc, unreadable)
                continue
            try:
                # The first read's bytes may lie in two pieces (a read, then the tail read).
                first = firsts[id(loc)]
                head = buffer.get(
                    ByteRange(first.offset, min(first.length, fmt.MAX_BLOOM_FILTER_HEADER_SIZE))
                )
                header, header_len = fmt.parse_bloom_filter_header(head)
                check_header(header, header_len, loc, footer_start=self.footer_start, source=name)
            except BloomFilterError as err:
                fail(loc, err)
                continue
            parsed.append((loc, ByteRange(loc.offset + header_len, header.num_bytes)))
        unread = self._read_into(buffer, [gap for _, b in parsed for gap in buffer.missing(b)])

        for loc, bitset in parsed:
            if unreadable := _overlapping(bitset, unread):
                fail(loc, unreadable)
                continue
            key = (loc.chunk.row_group, loc.chunk.path)
            self._cache[key] = out[key] = SplitBlockBloomFilter.from_bytes(buffer.get(bitset))
        return out, failed

    def _load_encrypted(
        self,
        todo: list[FilterLocation],
        out: dict[tuple[int, str], SplitBlockBloomFilter | None],
        failed: dict[tuple[int, str], BloomFilterError],
    ) -> None:
        """Load the filters of encrypted column chunks: two GCM modules each (header, bitset),
        every length prefix checked against the file before anything is read by it."""
        decryptor = self._decryptor
        assert decryptor is not None
        name = self._source.name
        footer_start = self.footer_start

        def fail(loc: FilterLocation, err: BloomFilterError) -> None:
            _fail(failed, name, loc, err)

        buffer = self._held_copy()
        firsts = {id(loc): loc.first_read(footer_start) for loc in todo}
        unread = self._read_into(buffer, [g for r in firsts.values() for g in buffer.missing(r)])

        # The header modules: length prefix, decrypt, decode; then the bitset module's range.
        parsed: list[tuple[FilterLocation, int, ByteRange]] = []
        for loc in todo:
            chunk = loc.chunk
            key, ordinal = self._chunk_keys[(chunk.row_group, chunk.path)]
            header_module = cipher.MODULE_NAMES[cipher.BLOOM_FILTER_HEADER]
            try:
                if unreadable := _overlapping(firsts[id(loc)], unread):
                    raise unreadable
                first = firsts[id(loc)]
                head = buffer.get(ByteRange(loc.offset, min(first.length, MODULE_PREFIX)))
                room = footer_start - loc.offset - MODULE_PREFIX
                if loc.length is not None:
                    room = min(room, loc.length - MODULE_PREFIX)
                header_len = cipher.module_length(
                    head, available=room, module_type=cipher.BLOOM_FILTER_HEADER
                )
                if header_len > MAX_ENCRYPTED_HEADER_MODULE_SIZE:
                    raise CorruptFileError(
                        f"encrypted Bloom filter header of {header_len} bytes exceeds "
                        f"{MAX_ENCRYPTED_HEADER_MODULE_SIZE} bytes"
                    )
                body_range = ByteRange(loc.offset + MODULE_PREFIX, header_len)
                missing = buffer.missing(body_range)
                if missing and (unread_header := self._read_into(buffer, missing)):
                    raise next(iter(unread_header.values()))
                try:
                    plain = decryptor.decrypt_module(
                        buffer.get(body_range),
                        key,
                        cipher.BLOOM_FILTER_HEADER,
                        ordinal,
                        chunk.column_index,
                    )
                except DecryptionError as err:
                    raise DecryptionError(err.reason, module=header_module) from None
                header, plain_len = fmt.parse_bloom_filter_header(plain)
                check_header(
                    header, plain_len, FilterLocation(chunk, loc.offset, None),
                    footer_start=footer_start, source=name,
                )  # fmt: skip
                bitset_at = body_range.end
                bitset_len = header.num_bytes + cipher.GCM_OVERHEAD
                total = MODULE_PREFIX + header_len + MODULE_PREFIX + bitset_len
                if loc.length is not None and total != loc.length:
                    raise CorruptFileError(
                        f"bloom_filter_length {loc.length} does not match the encrypted header "
                        f"({MODULE_PREFIX + header_len} bytes) and bitset "
                        f"({MODULE_PREFIX + bitset_len} bytes)"
                    )
                if bitset_at + MODULE_PREFIX + bitset_len > footer_start:
                    raise CorruptFileError(
                        f"encrypted Bloom filter bitset of {bitset_len} bytes at {bitset_at} "
                        f"runs past the footer, which starts at {footer_start}"
                    )
            except BloomFilterError as err:
                fail(loc, err)
                continue
            parsed.append((loc, header.num_bytes, ByteRange(bitset_at, MODULE_PREFIX + bitset_len)))
        unread = self._read_into(buffer, [g for _, _, b in parsed for g in buffer.missing(b)])

        bitset_module = cipher.MODULE_NAMES[cipher.BLOOM_FILTER_BITSET]
        for loc, num_bytes, bitset in parsed:
            chunk = loc.chunk
            key, ordinal = self._chunk_keys[(chunk.row_group, chunk.path)]
            try:
                if unreadable := _overlapping(bitset, unread):
                    raise unreadable
                module = memoryview(buffer.get(bitset))
                claimed = cipher.module_length(
                    module[:MODULE_PREFIX],
                    available=len(module) - MODULE_PREFIX,
                    module_type=cipher.BLOOM_FILTER_BITSET,
                )
                if claimed != num_bytes + cipher.GCM_OVERHEAD:
                    raise CorruptFileError(
                        f"encrypted Bloom filter bitset of {claimed} bytes, its header says "
                        f"{num_bytes} bytes (+ {cipher.GCM_OVERHEAD} of nonce and tag)"
                    )
                try:
                    plain = decryptor.decrypt_module(
                        module[MODULE_PREFIX:],
                        key,
                        cipher.BLOOM_FILTER_BITSET,
                        ordinal,
                        chunk.column_index,
                    )
                except DecryptionError as err:
                    raise DecryptionError(err.reason, module=bitset_module) from None
            except BloomFilterError as err:
                fail(loc, err)
                continue
            k = (chunk.row_group, chunk.path)
            self._cache[k] = out[k] = SplitBlockBloomFilter.from_bytes(plain)

    def _read_into(
        self,
        buffer: ReadBuffer,
        ranges: list[ByteRange],
        keep: ReadBuffer | None = None,
        max_gap: int | None = None,
    ) -> dict[ByteRange, BloomFilterError]:
        """Read ``ranges``, coalesced, into ``buffer`` (and ``keep``); returns the ranges that
        could not be read. When a coalesced read fails (a truncated file, say), each range is
        read alone, so that one bad range does not spoil the others; not when the store failed
        to answer (a :class:`FileReadError`), which says nothing about the ranges: every one
        is then unread with that error, without asking a failing store again."""
        merged = coalesce(ranges, self._source.max_gap if max_gap is None else max_gap)
        try:
            datas = self._source.read(merged)
        except FileReadError as err:
            return dict.fromkeys(ranges, err)
        except BloomFilterError:
            datas = None
        if datas is not None:
            for r, data in zip(merged, datas, strict=True):
                buffer.add(r.offset, data)
                if keep is not None:
                    keep.add(r.offset, data)
            return {}
        unread: dict[ByteRange, BloomFilterError] = {}
        for r in ranges:
            try:
                (data,) = self._source.read([r])
            except BloomFilterError as err:
                unread[r] = err
                continue
            buffer.add(r.offset, data)
            if keep is not None:
                keep.add(r.offset, data)
        return unread


def _fail(
    failed: dict[tuple[int, str], BloomFilterError],
    name: str,
    loc: FilterLocation,
    err: BloomFilterError,
) -> None:
    """Record ``err`` as the error of the filter at ``loc``, located."""
    chunk = loc.chunk
    failed[(chunk.row_group, chunk.path)] = err.located(
        source=name, row_group=chunk.row_group, column=chunk.path, offset=loc.offset
    )


def _overlapping(
    r: ByteRange, unread: dict[ByteRange, BloomFilterError]
) -> BloomFilterError | None:
    """The error of an unread range that overlaps ``r``, if any."""
    for bad, err in unread.items():
        if bad.offset < r.end and r.offset < bad.end:
            return err
    return None


def _block_ranges(bitset: int, num_bytes: int, hashes: Sequence[int]) -> dict[int, ByteRange]:
    """The 32-byte blocks the hashes fall in, by index, of the bitset of ``num_bytes`` at
    ``bitset``."""
    num_blocks = num_bytes // BYTES_PER_BLOCK
    ranges = {}
    for h in hashes:
        block = block_index(h, num_blocks)
        ranges[block] = ByteRange(bitset + block * BYTES_PER_BLOCK, BYTES_PER_BLOCK)
    return ranges


def _warn(err: BloomFilterError) -> None:
    # stacklevel 3: the warning points at the caller of the public method.
    warnings.warn(
        f"{err}; the filter is ignored (its row group is kept)", BloomFilterWarning, stacklevel=3
    )
