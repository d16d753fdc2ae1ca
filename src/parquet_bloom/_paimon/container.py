"""Paimon's ``FileIndexFormat``: the container of one data file's indexes.

A ``.index`` file, or the bytes a manifest entry embeds, is (paimon-common
``fileindex/FileIndexFormat.java``, Java ``DataOutput``, big-endian):

- the magic (int64 1493475289347502), the version (int32 1) and the head's length (int32,
  counted from the file's start, so the body starts there);
- the number of columns (int32); per column its name (Java modified UTF-8: a u16 length, then
  the bytes) and its number of indexes (int32); per index its type's name (``bloom-filter``,
  ``bitmap``, ...), its start (int32, from the file's start; -1: an empty index, no bytes) and
  its length (int32);
- the length of the "redundant" bytes (int32; 0, kept for later versions) and those bytes;
- the body: each index's bytes, in the head's order.

Paimon's writer orders the columns as its ``HashMap``s iterate them (``DataFileIndexWriter``
collects them in maps keyed by name): :func:`paimon_column_order` gives that order, so that a
container built here is the one Paimon writes, byte for byte. docs/paimon.md#the-container.

Untrusted input: :func:`parse_preamble` and :func:`parse_head` check every length against the
bytes there are before taking them, and against :data:`MAX_HEAD_LENGTH`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

__all__ = [
    "EMPTY_INDEX_FLAG",
    "MAGIC",
    "MAX_HEAD_LENGTH",
    "PREAMBLE_LENGTH",
    "VERSION",
    "Head",
    "IndexEntry",
    "encode",
    "java_hash_map_order",
    "paimon_column_order",
    "parse_head",
    "parse_preamble",
]

MAGIC = 1493475289347502
VERSION = 1  # Version.V_1, the only one there is
EMPTY_INDEX_FLAG = -1  # an index with no bytes (a map column's key that was never written)
PREAMBLE_LENGTH = 16  # magic, version, head length
# The smallest head: the preamble, a column count and the redundant length.
_MIN_HEAD_LENGTH = PREAMBLE_LENGTH + 8
# A head is a few bytes a column (name, count, a type name, start and length per index):
# 16 MiB would name over 100,000 columns with long names. A larger stated length is not a
# head Paimon wrote, and is refused before it is read.
MAX_HEAD_LENGTH = 16 * 1024 * 1024
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class IndexEntry:
    """One index in the head: its ``column``, ``index_type`` (``bloom-filter``, ``bitmap``,
    ...), ``offset`` (from the start of the container; -1 for an empty index) and ``length``."""

    column: str
    index_type: str
    offset: int
    length: int

    @property
    def empty(self) -> bool:
        """An index with no bytes: no value of the column was written (Paimon skips the file
        for any value)."""
        return self.offset == EMPTY_INDEX_FLAG


@dataclass(frozen=True)
class Head:
    """The decoded head: ``version``, ``head_length`` (where the body starts), ``entries``
    in the head's order, and the ``redundant`` bytes (empty in every version so far)."""

    version: int
    head_length: int
    entries: tuple[IndexEntry, ...]
    redundant: bytes


def parse_preamble(data: bytes, size: int, *, source: str | None = None) -> int:
    """The head's length, from the container's first :data:`PREAMBLE_LENGTH` bytes
    (``data``) of ``size`` bytes in all. Raises CorruptFileError for a short container, a bad
    magic or a head length that does not fit, UnsupportedFileError for another version."""
    if size < _MIN_HEAD_LENGTH or len(data) < PREAMBLE_LENGTH:
        raise CorruptFileError(
            f"a Paimon file index of {size} bytes: shorter than the smallest head "
            f"({_MIN_HEAD_LENGTH} bytes)",
            source=source,
            offset=0,
        )
    magic = int.from_bytes(data[:8], "big", signed=True)
    if magic != MAGIC:
        raise CorruptFileError(
            f"not a Paimon file index: magic {magic}, expected {MAGIC}", source=source, offset=0
        )
    version = int.from_bytes(data[8:12], "big", signed=True)
    if version != VERSION:
        raise UnsupportedFileError(
            f"a Paimon file index of version {version}; version {VERSION} is read here",
            source=source,
            offset=8,
        )
    head_length = int.from_bytes(data[12:16], "big", signed=True)
    if not _MIN_HEAD_LENGTH <= head_length <= min(size, MAX_HEAD_LENGTH):
        raise CorruptFileError(
            f"head length {head_length} out of range: from {_MIN_HEAD_LENGTH} to "
            f"{min(size, MAX_HEAD_LENGTH)} (the container's {size} bytes, and at most "
            f"MAX_HEAD_LENGTH = {MAX_HEAD_LENGTH})",
            source=source,
            offset=12,
        )
    return head_length


class _Cursor:
    """Reads Java ``DataInput`` values from the head, each checked against its end."""

    def __init__(self, data: bytes, start: int, end: int, source: str | None) -> None:
        self.data, self.at, self.end, self.source = data, start, end, source

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > self.end:
            raise CorruptFileError(
                f"{what} of {n} bytes runs past the head's end ({self.end})",
                source=self.source,
                offset=self.at,
            )
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def int32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "big", signed=True)

    def count(self, what: str, least_bytes_each: int) -> int:
        at = self.at
        n = self.int32(what)
        if n < 0 or n * least_bytes_each > self.end - self.at:
            raise CorruptFileError(
                f"{what} {n} cannot fit in the head's {self.end - self.at} remaining bytes",
                source=self.source,
                offset=at,
            )
        return n

    def utf(self, what: str) -> str:
        at = self.at
        n = int.from_bytes(self.take(2, what), "big")
        raw = self.take(n, what)
        try:
            return decode_modified_utf8(raw)
        except UnicodeDecodeError as err:
            raise CorruptFileError(
                f"{what} is not Java modified UTF-8: {err.reason}", source=self.source, offset=at
            ) from err


def parse_head(data: bytes, size: int, *, source: str | None = None) -> Head:
    """The head from ``data``, which holds at least the container's first ``head_length``
    bytes (:func:`parse_preamble`) of ``size`` bytes in all. Each index must lie after the
    head and inside the container; a column or index named twice is refused (Paimon never
    writes one, and which to believe is unclear)."""
    head_length = parse_preamble(data, size, source=source)
    if len(data) < head_length:
        raise CorruptFileError(
            f"short read: the head is {head_length} bytes, got {len(data)}",
            source=source,
            offset=0,
        )
    cur = _Cursor(data, PREAMBLE_LENGTH, head_length, source)
    entries: list[IndexEntry] = []
    seen: set[tuple[str, str]] = set()
    columns_seen: set[str] = set()
    # Each column takes at least a 2-byte name length and a 4-byte count; each index a 2-byte
    # name length and two ints.
    for _ in range(cur.count("column count", 6)):
        column_at = cur.at
        column = cur.utf("a column name")
        if column in columns_seen:
            raise CorruptFileError(
                f"column {column!r} is named twice in the head", source=source, offset=column_at
            )
        columns_seen.add(column)
        for _ in range(cur.count(f"the index count of column {column!r}", 10)):
            entry_at = cur.at
            index_type = cur.utf("an index type")
            start = cur.int32("an index start")
            length = cur.int32("an index length")
            if (column, index_type) in seen:
                raise CorruptFileError(
                    f"index {index_type!r} of column {column!r} is named twice",
                    source=source,
                    offset=entry_at,
                )
            seen.add((column, index_type))
            if start != EMPTY_INDEX_FLAG and not (
                head_length <= start and length >= 0 and start + length <= size
            ):
                raise CorruptFileError(
                    f"index {index_type!r} of column {column!r} at {start}, {length} bytes, "
                    f"is not within the body (bytes {head_length} to {size})",
                    source=source,
                    offset=entry_at,
                )
            entries.append(IndexEntry(column, index_type, start, length))
    redundant = cur.take(cur.count("the redundant length", 1), "the redundant bytes")
    return Head(VERSION, head_length, tuple(entries), redundant)


# -- Java modified UTF-8 (DataOutput.writeUTF / DataInput.readUTF) ------------------------------


def decode_modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: U+0000 as ``C0 80``, characters beyond U+FFFF as two 3-byte
    surrogates. Raises UnicodeDecodeError for anything else that is not UTF-8."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    if any(0xD800 <= ord(c) < 0xE000 for c in text):
        # Join surrogate pairs into their code point; a lone surrogate stays (Java keeps it).
        text = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return text


def encode_modified_utf8(text: str) -> bytes:
    """``DataOutput.writeUTF``'s bytes after its u16 length."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        c = (units[i] << 8) | units[i + 1]
        if 0 < c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes((0xC0 | (c >> 6), 0x80 | (c & 0x3F)))
        else:
            out += bytes((0xE0 | (c >> 12), 0x80 | ((c >> 6) & 0x3F), 0x80 | (c & 0x3F)))
    return bytes(out)


def _utf(text: str) -> bytes:
    raw = encode_modified_utf8(text)
    if len(raw) > 0xFFFF:
        raise ValueError(f"{text[:40]!r}...: {len(raw)} bytes, more than Java's writeUTF takes")
    return len(raw).to_bytes(2, "big") + raw


# -- writing -----------------------------------------------------------------------------------


def encode(indexes: Iterable[tuple[str, Iterable[tuple[str, bytes | None]]]]) -> bytes:
    """A container of ``indexes`` (``(column, [(index type, bytes or None), ...])`` in the
    order given; None is an empty index), as ``FileIndexFormat.Writer`` writes it."""
    columns = [(column, list(items)) for column, items in indexes]
    body = bytearray()
    placed: list[tuple[str, list[tuple[str, int, int]]]] = []
    for column, items in columns:
        spots = []
        for index_type, payload in items:
            if payload is None:
                spots.append((index_type, EMPTY_INDEX_FLAG, 0))
            else:
                spots.append((index_type, len(body), len(payload)))
                body += payload
        placed.append((column, spots))
    names = b"".join(_utf(c) + b"".join(_utf(t) for t, _, _ in s) for c, s in placed)
    n_indexes = sum(len(s) for _, s in placed)
    head_length = PREAMBLE_LENGTH + 4 + 8 * n_indexes + 4 * len(placed) + 4 + len(names)
    if head_length + len(body) > _INT_MAX:
        raise ValueError(f"a container of {head_length + len(body)} bytes: offsets are Java ints")
    out = bytearray()
    out += MAGIC.to_bytes(8, "big") + VERSION.to_bytes(4, "big") + head_length.to_bytes(4, "big")
    out += len(placed).to_bytes(4, "big")
    for column, spots in placed:
        out += _utf(column) + len(spots).to_bytes(4, "big")
        for index_type, start, length in spots:
            absolute = start if start == EMPTY_INDEX_FLAG else start + head_length
            out += _utf(index_type) + absolute.to_bytes(4, "big", signed=True)
            out += length.to_bytes(4, "big")
    out += (0).to_bytes(4, "big")  # the redundant length
    assert len(out) == head_length
    return bytes(out + body)


# -- the order of Java's HashMap ---------------------------------------------------------------

_TREEIFY_THRESHOLD = 8  # java.util.HashMap: a bin this long becomes a tree...
_MIN_TREEIFY_CAPACITY = 64  # ...or, in a smaller table, the table doubles instead


def java_string_hash(text: str) -> int:
    """``String.hashCode``: ``s[0] x 31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def _column_key_hash(name: str) -> int:
    """``FileIndexOptions.Column.hashCode`` of a plain column:
    ``Arrays.hashCode(new Object[] {name, null, false})``."""
    h = 31 + java_string_hash(name)
    h = (31 * h + 0) & 0xFFFFFFFF
    return (31 * h + 1237) & 0xFFFFFFFF  # Boolean.hashCode(false)


def java_hash_map_order(
    keys: Sequence[str],
    hashes: Mapping[str, int] | None = None,
    *,
    compute_if_absent: bool = False,
) -> list[str]:
    """The order a ``java.util.HashMap`` iterates ``keys`` (distinct) added in this order, with
    ``hashes`` their ``hashCode`` (default: ``String.hashCode``), by ``put`` or by
    ``computeIfAbsent``, simulated (OpenJDK 8 to 21): bins ``(h ^ h >>> 16) & (capacity - 1)``
    from 16, doubling past 3/4 full (``put`` right after adding; ``computeIfAbsent`` before
    the next addition) or when a bin grows long in a table under 64 (9 entries for ``put``,
    8 for ``computeIfAbsent``); ``put`` appends to a bin, ``computeIfAbsent`` prepends; a
    doubling splits each bin keeping its order. A bin that becomes a tree (that many colliding
    keys in a table of 64 or more) is not modelled."""
    codes = {k: (java_string_hash(k) if hashes is None else hashes[k]) for k in keys}
    spread = {k: (h ^ (h >> 16)) & 0xFFFFFFFF for k, h in codes.items()}
    table: list[list[str]] = []

    def resize() -> None:
        capacity = 2 * len(table) if table else 16
        bins: list[list[str]] = [[] for _ in range(capacity)]
        for b in table:
            for k in b:
                bins[spread[k] & (capacity - 1)].append(k)
        table[:] = bins

    for size, key in enumerate(keys):
        if not table or (compute_if_absent and size > len(table) * 3 // 4):
            resize()
        b = table[spread[key] & (len(table) - 1)]
        before = len(b)
        if compute_if_absent:
            b.insert(0, key)
            long_bin = before >= _TREEIFY_THRESHOLD - 1
        else:
            b.append(key)
            long_bin = before >= _TREEIFY_THRESHOLD
        if long_bin and len(table) < _MIN_TREEIFY_CAPACITY:
            resize()
        if not compute_if_absent and size + 1 > len(table) * 3 // 4:
            resize()
    return [k for b in table for k in b]


def paimon_column_order(columns: Sequence[str]) -> list[str]:
    """The order Paimon's ``DataFileIndexWriter`` writes the indexes of ``columns`` (as the
    table's ``file-index.<type>.columns`` option lists them): ``FileIndexOptions`` adds them
    to a HashMap keyed by ``Column`` (``computeIfAbsent``), the writer puts its maintainers in
    one keyed by name in that map's order (``put``), and collects the serialised indexes in
    another keyed by name (``computeIfAbsent``), which the container follows."""
    distinct = list(dict.fromkeys(columns))
    options = {c: _column_key_hash(c) for c in distinct}
    by_column = java_hash_map_order(distinct, options, compute_if_absent=True)
    maintainers = java_hash_map_order(by_column)
    return java_hash_map_order(maintainers, compute_if_absent=True)
