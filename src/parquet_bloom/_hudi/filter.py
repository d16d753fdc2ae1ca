"""One Hudi record-key Bloom filter (:class:`HudiBloomFilter`), its size by Hudi's rule, and the
footer metadata it is read from; behind :mod:`parquet_bloom.hudi`, which re-exports all of it.
docs/hudi.md describes the format, with the sources of each fact."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._hudi import codec
from parquet_bloom._hudi.keys import KeyBuffer, encode_keys
from parquet_bloom._hudi.murmur import hash_chains, positions
from parquet_bloom._java import INT_MAX, java_int, java_utf8
from parquet_bloom.errors import BloomFilterError

__all__ = [
    "DEFAULT_FPP",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_NUM_ENTRIES",
    "FOOTER_KEY",
    "LEGACY_FOOTER_KEY",
    "MAX_RECORD_KEY_KEY",
    "MIN_RECORD_KEY_KEY",
    "TYPES",
    "TYPE_CODE_KEY",
    "FilterSize",
    "HudiBloomFilter",
    "filter_from_metadata",
    "filter_size",
]

# The footer's key-value metadata (HoodieBloomFilterWriteSupport).
FOOTER_KEY = "org.apache.hudi.bloomfilter"
LEGACY_FOOTER_KEY = "com.uber.hoodie.bloomfilter"  # before Hudi became an Apache project
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"  # written for DYNAMIC_V0 only
MIN_RECORD_KEY_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY_KEY = "hoodie_max_record_key"
_KEYS = (FOOTER_KEY, LEGACY_FOOTER_KEY, TYPE_CODE_KEY, MIN_RECORD_KEY_KEY, MAX_RECORD_KEY_KEY)

TYPES = (codec.SIMPLE, codec.DYNAMIC_V0)  # BloomFilterTypeCode

# Hudi's defaults (HoodieStorageConfig / HoodieIndexConfig): hoodie.index.bloom.num_entries,
# hoodie.index.bloom.fpp, hoodie.bloom.index.filter.dynamic.max.entries; the default type is
# DYNAMIC_V0 (hoodie.bloom.index.filter.type).
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 1e-9
DEFAULT_MAX_ENTRIES = 100_000

# Keys hashed at once: their hashes, positions and tests take ~300 bytes a key at 30 hashes.
_CHUNK = 32_768


class FilterSize(NamedTuple):
    """A filter's size by Hudi's rule: bits per row and hash functions."""

    num_bits: int
    num_hashes: int


def filter_size(num_entries: int, fpp: float) -> FilterSize:
    """The bits and hash count Hudi gives ``num_entries`` keys at ``fpp`` (BloomFilterUtils):
    ``bits = (int) ceil(n * (-ln p / ln(2)^2))``, ``k = (int) ceil(ln 2 * bits / n)``, in
    Java's double arithmetic (the same IEEE operations, in the same order). The defaults give
    2,587,966 bits and 30 hashes."""
    if isinstance(num_entries, bool) or not isinstance(num_entries, int | np.integer):
        raise TypeError(f"num_entries must be an integer, not {type(num_entries).__name__}")
    if not 0 < num_entries <= INT_MAX:
        raise ValueError(f"num_entries must be from 1 to {INT_MAX} (a Java int), not {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be between 0 and 1, not {fpp}")
    n = int(num_entries)
    log2_squared = math.log(2) * math.log(2)
    bits = java_int(math.ceil(n * (-math.log(fpp) / log2_squared)))
    hashes = java_int(math.ceil(math.log(2) * bits / n))
    return FilterSize(bits, hashes)


def _popcount(bits: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Bits set in each row."""
    counts: NDArray[np.int64] = np.unpackbits(bits, axis=1).sum(axis=1, dtype=np.int64)
    return counts


def _any_passes(row_fpps: list[float]) -> float:
    """The chance that at least one row passes: ``1 - prod(1 - f)``, kept exact for tiny
    rates (``-expm1(sum(log1p(-f)))``)."""
    if any(f >= 1.0 for f in row_fpps):
        return 1.0
    return -math.expm1(math.fsum(math.log1p(-f) for f in row_fpps))


class HudiBloomFilter:
    """One Hudi record-key Bloom filter: SIMPLE (one bit vector) or DYNAMIC_V0 (rows of them;
    a key may be present when any row says so).

    Read one with :func:`read_bloom_filter` (from a base file) or :meth:`from_footer_value`
    (the footer's Base64 string); build one with :func:`build_bloom_filter`. Keys are ``str``
    (hashed as Java's UTF-8 bytes of the same string) or ``bytes``.

    Attributes: ``type`` (``"SIMPLE"`` or ``"DYNAMIC_V0"``), ``num_hashes``, ``vector_size``
    (bits per row), ``rows``, ``keys_per_row`` and ``current_records`` (DYNAMIC_V0's ``nr``
    and ``currentNbRecord``; None for SIMPLE), ``max_entries`` (the bound DYNAMIC_V0 grows to
    while keys are added; not serialised, so 0 for a filter that was read, as in Hudi),
    ``min_record_key`` / ``max_record_key`` (the file's key range, when read from a file) and
    ``source`` (the file).
    """

    def __init__(
        self,
        type: str,
        num_hashes: int,
        vector_size: int,
        *,
        keys_per_row: int | None = None,
        max_entries: int | None = None,
    ) -> None:
        """An empty filter, as Hudi starts one: SIMPLE, or DYNAMIC_V0 with one row of
        ``keys_per_row`` keys, growing a row at a time up to ``max_entries``."""
        kind = str(type).upper()
        if kind not in TYPES:
            raise ValueError(f"type must be one of {', '.join(TYPES)}, not {type!r}")
        if not 0 < num_hashes <= codec.MAX_NUM_HASHES:
            raise ValueError(
                f"num_hashes must be from 1 to {codec.MAX_NUM_HASHES}, not {num_hashes}"
            )
        if not 0 < vector_size <= INT_MAX:
            raise ValueError(f"vector_size must be from 1 to {INT_MAX} bits, not {vector_size}")
        if kind == codec.DYNAMIC_V0:
            if keys_per_row is None or not 0 < keys_per_row <= INT_MAX:
                raise ValueError(f"a DYNAMIC_V0 filter needs keys_per_row >= 1, not {keys_per_row}")
            max_entries = DEFAULT_MAX_ENTRIES if max_entries is None else int(max_entries)
        self.type = kind
        self.num_hashes = int(num_hashes)
        self.vector_size = int(vector_size)
        self.hash_type = codec.MURMUR_HASH
        self.keys_per_row = None if kind == codec.SIMPLE else int(keys_per_row or 0)
        self.current_records = None if kind == codec.SIMPLE else 0
        self.max_entries = max_entries if kind == codec.DYNAMIC_V0 else None
        self.min_record_key: str | None = None
        self.max_record_key: str | None = None
        self.source: str | None = None
        self._bits = np.zeros((1, codec.row_bytes(self.vector_size)), dtype=np.uint8)
        # InternalDynamicBloomFilter's state while adding, not serialised.
        self._reached_max = False
        self._cursor = 0  # curMatrixIndex

    # -- reading ----------------------------------------------------------------------------

    @classmethod
    def _from_decoded(cls, decoded: codec.Decoded) -> HudiBloomFilter:
        f = cls.__new__(cls)
        f.type = decoded.type
        f.num_hashes = decoded.num_hashes
        f.vector_size = decoded.vector_size
        f.hash_type = decoded.hash_type
        f.keys_per_row = decoded.keys_per_row
        f.current_records = decoded.current_records
        # A filter Hudi reads back has maxNr = 0 (the no-argument constructor): adding to it
        # fills the last row, then goes round-robin over the rows it has.
        f.max_entries = 0 if decoded.type == codec.DYNAMIC_V0 else None
        f.min_record_key = f.max_record_key = f.source = None
        f._bits = decoded.bits
        f._reached_max = False
        f._cursor = 0
        return f

    @classmethod
    def from_bytes(
        cls, data: bytes, type: str = codec.SIMPLE, *, source: str | None = None
    ) -> HudiBloomFilter:
        """A filter from its ``DataOutput`` bytes (the decoded Base64)."""
        return cls._from_decoded(codec.decode(data, type, source=source))

    @classmethod
    def from_footer_value(
        cls, value: str | bytes, type: str | None = None, *, source: str | None = None
    ) -> HudiBloomFilter:
        """A filter from the footer's Base64 string; ``type`` is the footer's type code
        (``hoodie_bloom_filter_type_code``), None (absent) meaning SIMPLE. Raises
        CorruptFileError for bad Base64 or bytes that disagree with the sizes they state,
        UnsupportedFileError for a Jenkins-hashed or unknown filter."""
        raw = codec.decode_base64(value, source=source)
        return cls.from_bytes(raw, codec.SIMPLE if type is None else type, source=source)

    # -- what it holds ----------------------------------------------------------------------

    @property
    def rows(self) -> int:
        """Bit vectors: 1 for SIMPLE; DYNAMIC_V0's row count."""
        return len(self._bits)

    @property
    def bits(self) -> NDArray[np.uint8]:
        """A read-only view of the bits, shape ``(rows, ceil(vector_size / 8))``: bit ``i`` of
        a row is byte ``i >> 3``, mask ``1 << (i & 7)``."""
        view = self._bits.view()
        view.flags.writeable = False
        return view

    @property
    def keys_added(self) -> int | None:
        """Keys added, as DYNAMIC_V0's header records them (``(rows - 1) * nr +
        currentNbRecord``, which holds past the bound too: the count keeps rising); None for
        SIMPLE, which records none."""
        if self.keys_per_row is None or self.current_records is None:
            return None
        return (self.rows - 1) * self.keys_per_row + self.current_records

    def key_in_range(self, key: str) -> bool:
        """Whether ``key`` lies in the file's ``[min_record_key, max_record_key]`` (Hudi's
        ``BloomIndexFileInfo.isKeyInRange``); True when the range is not known. Java compares
        strings by UTF-16 code units; writers that collected the range as UTF-8 bytes
        (Spark's rows) order by code points: a key inside the range by either order counts
        as inside, so that no file holding the key is left out."""
        low, high = self.min_record_key, self.max_record_key
        if low is None or high is None:
            return True
        if low <= key <= high:  # code point order
            return True
        units = [s.encode("utf-16-be", "surrogatepass") for s in (low, key, high)]
        return units[0] <= units[1] <= units[2]

    # -- probing ----------------------------------------------------------------------------

    def might_contain(self, key: str | bytes) -> bool:
        """False when ``key`` was certainly never added; True when it may have been."""
        data = java_utf8(key) if isinstance(key, str) else bytes(key)
        return bool(self.might_contain_many([data])[0])

    def might_contain_many(self, keys: Any) -> NDArray[np.bool_]:
        """:meth:`might_contain` of every key (a sequence of ``str``/``bytes``, a numpy array,
        or an Arrow string or binary array), vectorised."""
        buffer = encode_keys(keys)
        n = len(buffer)
        found = np.zeros(n, dtype=bool)
        for start in range(0, n, _CHUNK):
            stop = min(start + _CHUNK, n)
            chunk = KeyBuffer(buffer.data, buffer.offsets[start : stop + 1])
            found[start:stop] = self.might_contain_hashes(hash_chains(chunk, self.num_hashes))
        return found

    def might_contain_hashes(self, hashes: NDArray[np.int32]) -> NDArray[np.bool_]:
        """:meth:`might_contain_many` of keys already hashed by :func:`hash_keys` with this
        filter's ``num_hashes`` (shape ``(keys, num_hashes)``): hash keys once, test them
        against many filters."""
        chains = np.asarray(hashes, dtype=np.int32)
        if chains.ndim != 2 or chains.shape[1] != self.num_hashes:
            raise ValueError(
                f"hashes must have shape (keys, {self.num_hashes}), not {chains.shape}"
            )
        where = positions(chains, self.vector_size)
        byte = where >> 3
        shift = (where & 7).astype(np.uint8)
        found = np.zeros(len(chains), dtype=bool)
        # Rows tested together, as many as keep the gathered bits near _CHUNK x 32 bytes.
        step = max(1, (_CHUNK * 32) // max(1, byte.size))
        for start in range(0, self.rows, step):
            rows = self._bits[start : start + step]
            gathered = rows[:, byte] >> shift  # (rows, keys, hashes)
            hit = (gathered & np.uint8(1)).astype(bool).all(axis=2).any(axis=0)
            found |= hit
        return found

    # -- adding -----------------------------------------------------------------------------

    def _plan_rows(self, n: int) -> NDArray[np.int64]:
        """The row each of ``n`` keys goes to, advancing the state as Hudi's ``add`` does key
        by key (InternalDynamicBloomFilter.getActiveStandardBF): the last row until it holds
        ``nr`` keys; then a new row while ``rows * nr < maxNr``; then, once bounded, row 0
        and round-robin over the rows from row 0."""
        rows_of = np.empty(n, dtype=np.int64)
        if self.type == codec.SIMPLE:
            rows_of.fill(0)
            return rows_of
        nr = self.keys_per_row
        current = self.current_records
        bound = self.max_entries
        assert nr is not None and current is not None and bound is not None
        if nr < 1:
            raise ValueError(f"cannot add keys to a DYNAMIC_V0 filter of {nr} keys per row")
        rows, i = self.rows, 0
        while i < n:
            if self._reached_max:
                rest = np.arange(n - i, dtype=np.int64)
                rows_of[i:] = (self._cursor + rest) % rows
                self._cursor += n - i
                current += n - i
                break
            if current >= nr:
                if rows * nr < bound:
                    rows += 1
                    current = 0
                else:
                    self._reached_max = True
                    rows_of[i] = 0  # the key that reaches the bound goes to row 0
                    current += 1
                    i += 1
                    continue
            take = min(n - i, nr - current)
            rows_of[i : i + take] = rows - 1
            current += take
            i += take
        # Java int arithmetic: the count wraps past 2**31 - 1, as Hudi's does.
        self.current_records = (current + 2**31) % 2**32 - 2**31
        if rows > self.rows:
            grown = np.zeros((rows, self._bits.shape[1]), dtype=np.uint8)
            grown[: self.rows] = self._bits
            self._bits = grown
        return rows_of

    def add_many(self, keys: Any) -> None:
        """Add keys in order, as Hudi adds a file's records: the same bits, rows and counts."""
        buffer = encode_keys(keys)
        rows_of = self._plan_rows(len(buffer))
        for start in range(0, len(buffer), _CHUNK):
            stop = min(start + _CHUNK, len(buffer))
            chunk = KeyBuffer(buffer.data, buffer.offsets[start : stop + 1])
            where = positions(hash_chains(chunk, self.num_hashes), self.vector_size)
            rows = rows_of[start:stop]
            one_row = rows.min() == rows.max()
            for row in rows[:1] if one_row else np.unique(rows):
                flat = (where if one_row else where[rows == row]).ravel()
                masks = np.left_shift(np.uint8(1), (flat & 7).astype(np.uint8))
                np.bitwise_or.at(self._bits[row], flat >> 3, masks)

    def add(self, key: str | bytes) -> None:
        """Add one key."""
        self.add_many([java_utf8(key) if isinstance(key, str) else bytes(key)])

    # -- writing ----------------------------------------------------------------------------

    def _decoded(self) -> codec.Decoded:
        return codec.Decoded(
            self.type,
            self.num_hashes,
            self.hash_type,
            self.vector_size,
            self._bits,
            self.keys_per_row,
            self.current_records,
        )

    def to_bytes(self) -> bytes:
        """The ``DataOutput`` bytes Hudi serialises this filter to."""
        return codec.encode(self._decoded())

    def to_footer_value(self) -> str:
        """The Base64 string Hudi writes under ``org.apache.hudi.bloomfilter``."""
        return codec.encode_base64(self.to_bytes())

    def footer_metadata(self) -> dict[str, str]:
        """The key-value metadata Hudi writes for this filter: the filter, the type code for
        DYNAMIC_V0, and the key range when it is known."""
        meta = {FOOTER_KEY: self.to_footer_value()}
        if self.type == codec.DYNAMIC_V0:
            meta[TYPE_CODE_KEY] = self.type
        if self.min_record_key is not None and self.max_record_key is not None:
            meta[MIN_RECORD_KEY_KEY] = self.min_record_key
            meta[MAX_RECORD_KEY_KEY] = self.max_record_key
        return meta

    # -- estimates --------------------------------------------------------------------------

    def bits_set(self) -> int:
        """Bits that are 1, over all rows."""
        return int(_popcount(self._bits).sum())

    def fraction_set(self) -> float:
        """The fraction of all rows' bits that are 1."""
        return self.bits_set() / (self.rows * self.vector_size)

    def _row_estimates(self) -> list[float]:
        m, k = self.vector_size, self.num_hashes
        estimates = []
        for bits_set in _popcount(self._bits).tolist():
            if bits_set == 0 or m == 1:
                estimates.append(float(bits_set))
                continue
            # A key sets k positions drawn uniformly; a bit stays 0 with (1 - 1/m)^(k n).
            unset = max(m - bits_set, 1) / m
            estimates.append(math.log(unset) / (k * math.log1p(-1.0 / m)))
        return estimates

    def estimate_num_keys(self) -> float:
        """The number of distinct keys whose adding best explains the bits set (summed over
        rows; a saturated row counts as all its bits but one)."""
        return float(sum(self._row_estimates()))

    def _row_fpp(self, keys: float) -> float:
        m, k = self.vector_size, self.num_hashes
        return float((-math.expm1(k * keys * math.log1p(-1.0 / m))) ** k) if m > 1 else 1.0

    def fpp(self, num_keys: float | None = None) -> float:
        """The chance that a key never added passes. Without ``num_keys``: from the bits set
        (each row passes with its fill fraction to the power ``num_hashes``; any row may
        pass). With ``num_keys``: expected after that many distinct keys added as Hudi adds
        them to this filter's rows (rows of ``nr`` keys, the rest spread over the rows)."""
        if num_keys is None:
            fills = _popcount(self._bits) / self.vector_size
            row_fpps = [float(f) ** self.num_hashes for f in fills.tolist()]
            return _any_passes(row_fpps)
        if num_keys < 0:
            raise ValueError(f"num_keys must be >= 0, not {num_keys}")
        if self.keys_per_row is None or self.rows == 1:
            loads = [float(num_keys)]
        else:
            nr = float(max(self.keys_per_row, 1))
            full = min(num_keys / nr, float(self.rows))
            loads = [nr] * int(full) + ([num_keys - int(full) * nr] if full < self.rows else [])
            extra = num_keys - self.rows * nr
            if extra > 0:
                loads = [nr + extra / self.rows] * self.rows
        return _any_passes([self._row_fpp(load) for load in loads])

    def describe(self) -> dict[str, Any]:
        """The filter in numbers, as ``inspect`` shows it: type, hashes, bits per row, rows,
        ``nr`` and the header's key count (DYNAMIC_V0), bits set, fill, estimated keys, the
        expected false-positive rate at that many keys, the key range."""
        estimate = self.estimate_num_keys()
        return {
            "type": self.type,
            "num_hashes": self.num_hashes,
            "vector_size": self.vector_size,
            "rows": self.rows,
            "keys_per_row": self.keys_per_row,
            "keys_added": self.keys_added,
            "bits_set": self.bits_set(),
            "fraction_set": self.fraction_set(),
            "estimated_keys": estimate,
            "fpp_at_estimate": self.fpp(estimate),
            "serialized_bytes": len(self.to_bytes()),
            "min_record_key": self.min_record_key,
            "max_record_key": self.max_record_key,
        }

    # -- Python protocol --------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HudiBloomFilter):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        extra = "" if self.keys_per_row is None else f", nr={self.keys_per_row}"
        return (
            f"<HudiBloomFilter {self.type}: {self.num_hashes} hashes, {self.vector_size:,} bits "
            f"x {self.rows} rows{extra}>"
        )


def filter_from_metadata(
    metadata: Mapping[str, str], *, source: str | None = None
) -> HudiBloomFilter | None:
    """The filter a footer's key-value metadata holds (Hudi's
    ``readBloomFilterFromMetadata``), or None."""
    value = metadata.get(FOOTER_KEY)
    if value is None:
        value = metadata.get(LEGACY_FOOTER_KEY)
    if value is None:
        return None
    try:
        f = HudiBloomFilter.from_footer_value(value, metadata.get(TYPE_CODE_KEY), source=source)
    except BloomFilterError as e:
        raise e.located(source=source) from e
    f.source = source
    f.min_record_key = metadata.get(MIN_RECORD_KEY_KEY)
    f.max_record_key = metadata.get(MAX_RECORD_KEY_KEY)
    return f
