"""How big each Parquet writer makes a Bloom filter, reproduced to the byte.

Every writer starts from the same formula, ``m = -8 * ndv / ln(1 - fpp ** (1/8))`` bits, which
gives eight-bit blocks a false-positive rate ``fpp`` for ``ndv`` distinct values
(docs/format-notes.md#how-writers-size-filters), and then rounds it its own way: to a multiple of a
block or not, to a power of two up or down, within its own bounds. Writer authors and the
``check`` command need the exact rounding, not an approximation, to say which writer's rule
reproduces a size found in a file, so each flavour below is a transcription of the writer's code:

- ``parquet-java``: ``BlockSplitBloomFilter.optimalNumOfBits`` and the ``BlockSplitBloomFilter(int,
  int)`` constructor (parquet-column), called by ``ColumnValueCollector`` with
  ``optimalNumOfBits(ndv, fpp) / 8`` and ``parquet.bloom.filter.max.bytes``.
- ``arrow-cpp``: ``BlockSplitBloomFilter::OptimalNumOfBits`` (``parquet/bloom_filter.h``).
- ``arrow-rs``: ``num_of_bits_from_ndv_fpp`` and ``optimal_num_of_bytes``
  (``parquet/src/bloom_filter/mod.rs``).
- ``duckdb``: the ``ParquetBloomFilter(num_entries, fpp)`` constructor (``parquet_reader.cpp``).
- ``clickhouse``: ``makeBloomFilter`` in ClickHouse's native Parquet writer
  (``src/Processors/Formats/Impl/Parquet/Write.cpp``), which sizes from a number of bits per
  distinct value rather than a rate (:func:`clickhouse_num_bytes`).
- ``spec``: this library's own rule, :func:`parquet_bloom._sbbf.optimal_num_bytes`.

Arrow C++ (2026) and arrow-rs (58.2 and later) then *fold* the filter after all values are in: they
OR groups of ``2**k`` adjacent blocks together, with ``k`` as large as keeps an estimated rate
within ``fpp`` (:func:`fold_to_fpp`). A folded filter's size therefore depends on the values
inserted, not only on the configured ``ndv`` and ``fpp``, which is why :func:`matching_flavors`
takes the chunk's hashes.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from parquet_bloom._sbbf import (
    BITS_PER_BLOCK,
    BYTES_PER_BLOCK,
    MAX_NUM_BYTES,
    MIN_NUM_BYTES,
    SALT,
    SplitBlockBloomFilter,
    optimal_num_bytes,
)
from parquet_bloom._sbbf import (
    bits_per_value as spec_bits_per_value,
)

__all__ = [
    "CLICKHOUSE_DEFAULT_BITS_PER_VALUE",
    "CLICKHOUSE_MAX_BLOCKS",
    "DEFAULT_FPP",
    "DEFAULT_NDV",
    "FLAVORS",
    "FOLDING_FLAVORS",
    "PARQUET_JAVA_DEFAULT_MAX_BYTES",
    "bits_set_by_size",
    "clickhouse_num_bytes",
    "expected_num_bytes",
    "fold_to_fpp",
    "matching_flavors",
    "num_folds",
    "written_num_bytes",
]

FLAVORS = ("spec", "parquet-java", "arrow-cpp", "arrow-rs", "duckdb", "clickhouse")
# The writers that fold their filters after inserting (Arrow C++ BlockSplitBloomFilter::
# FoldToTargetFpp, on by default in BloomFilterOptions::fold; arrow-rs Sbbf::fold_to_target_fpp,
# called by every column encoder's flush_bloom_filter).
FOLDING_FLAVORS = ("arrow-cpp", "arrow-rs")

# The rate each writer sizes for when none is configured: parquet-java ParquetProperties.
# DEFAULT_BLOOM_FILTER_FPP, Arrow C++ BloomFilterOptions::fpp, arrow-rs DEFAULT_BLOOM_FILTER_FPP,
# DuckDB ParquetWriteBindData::bloom_filter_false_positive_ratio; "spec" is this library's writer.
DEFAULT_FPP = {
    "spec": 0.01,
    "parquet-java": 0.01,
    "arrow-cpp": 0.05,
    "arrow-rs": 0.05,
    "duckdb": 0.01,
    # ClickHouse is configured in bits per value, not a rate: its default, 10.5 bits
    # (CLICKHOUSE_DEFAULT_BITS_PER_VALUE), is the one its setting's documentation puts at 1 %.
    "clickhouse": 0.01,
}
# The NDV the folding writers size for when none is configured: Arrow C++ resolves an unset
# BloomFilterOptions::ndv to max_row_group_length (DEFAULT_MAX_ROW_GROUP_LENGTH, 1024 * 1024
# rows); arrow-rs DEFAULT_BLOOM_FILTER_NDV is 1_048_576 since it folds (1_000_000 before).
# parquet-java without an NDV writes max-bytes filters; DuckDB always sizes for the chunk's
# dictionary, i.e. its actual NDV.
DEFAULT_NDV = {"arrow-cpp": 1024 * 1024, "arrow-rs": 1024 * 1024}

# ClickHouse's output_format_parquet_bloom_filter_bits_per_value default (Settings), and the most
# blocks its writer gives a filter (4 Mi blocks, 128 MiB): a chunk that would need more gets none.
CLICKHOUSE_DEFAULT_BITS_PER_VALUE = 10.5
CLICKHOUSE_MAX_BLOCKS = MAX_NUM_BYTES // BYTES_PER_BLOCK

# parquet-java ParquetProperties.DEFAULT_MAX_BLOOM_FILTER_BYTES ("parquet.bloom.filter.max.bytes"):
# the cap on every filter, and the size of every filter written without an expected NDV.
PARQUET_JAVA_DEFAULT_MAX_BYTES = 1024 * 1024

# The eight bits a value sets, one per 32-bit word of a block (docs/format-notes.md#sbbf-layout).
_BITS_SET_PER_BLOCK = 8
_BITS_PER_WORD = 32
# parquet-java BlockSplitBloomFilter.UPPER_BOUND_BYTES and Arrow C++ kMaximumBloomFilterBytes,
# in bits: the clamp both apply to the raw bit count before rounding.
_MAX_BITS = MAX_NUM_BYTES * 8
_MIN_BITS = MIN_NUM_BYTES * 8
# Java's (int) and Rust's `as usize` casts saturate; these are the bounds they saturate to.
_JAVA_INT_MAX = 2**31 - 1
_RUST_USIZE_MAX = 2**64 - 1


def _raw_bits(ndv: int, fpp: float) -> float:
    # Written as the writers write it, -8 * ndv / log(1 - pow(fpp, 1/8)), with the same libm
    # calls (C log and pow; Java Math.log and Math.pow; Rust ln and powf), so that values on a
    # rounding boundary fall the same way.
    return -8.0 * ndv / math.log(1.0 - math.pow(fpp, 1.0 / 8.0))


def _saturating_int(x: float, high: int) -> int:
    """Java ``(int) x`` / Rust ``x as usize``: truncate toward zero, NaN to 0, clamp to the type."""
    if math.isnan(x):
        return 0
    if x >= high:
        return high
    return max(int(x), 0)


def _next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _parquet_java(ndv: int, fpp: float, max_bytes: int) -> int:
    # BlockSplitBloomFilter.optimalNumOfBits(n, p)
    m = _raw_bits(ndv, fpp)
    num_bits = _saturating_int(m, _JAVA_INT_MAX)
    if num_bits > _MAX_BITS or m < 0:
        num_bits = _MAX_BITS
    # "Round numBits up to (k * BITS_PER_BLOCK)": the code says `& ~BITS_PER_BLOCK`, which clears
    # bit 8 only, not `& ~(BITS_PER_BLOCK - 1)`; reproduced as written.
    num_bits = (num_bits + BITS_PER_BLOCK - 1) & ~BITS_PER_BLOCK
    if num_bits < _MIN_BITS:
        num_bits = _MIN_BITS
    # new BlockSplitBloomFilter(optimalNumOfBits / 8, maxBloomFilterBytes): the constructor keeps
    # its 128 MiB bound unless the maximum lies strictly inside (32, 128 MiB), then initBitset
    # raises to 32, rounds up to a power of two and clamps to the maximum, which is not
    # necessarily a power of two itself.
    maximum = max_bytes if MIN_NUM_BYTES < max_bytes < MAX_NUM_BYTES else MAX_NUM_BYTES
    num_bytes = max(num_bits // 8, MIN_NUM_BYTES)
    if num_bytes & (num_bytes - 1):
        num_bytes = 1 << num_bytes.bit_length()  # Integer.highestOneBit(n) << 1
    return min(num_bytes, maximum)


def _arrow_cpp(ndv: int, fpp: float) -> int:
    # BlockSplitBloomFilter::OptimalNumOfBits / OptimalNumOfBytes
    m = _raw_bits(ndv, fpp)
    num_bits = _MAX_BITS if m < 0 or m > _MAX_BITS else int(m)
    num_bits = max(num_bits, _MIN_BITS)
    num_bits = min(_next_power_of_two(num_bits), _MAX_BITS)
    return num_bits >> 3


def _arrow_rs(ndv: int, fpp: float) -> int:
    # Sbbf::new_with_ndv_fpp: num_of_bits_from_ndv_fpp(ndv, fpp) / 8, then optimal_num_of_bytes
    # clamps to [BITSET_MIN_LENGTH, BITSET_MAX_LENGTH] and takes the next power of two.
    num_bits = _saturating_int(_raw_bits(ndv, fpp), _RUST_USIZE_MAX)
    num_bytes = min(max(num_bits // 8, MIN_NUM_BYTES), MAX_NUM_BYTES)
    return _next_power_of_two(num_bytes)


def _duckdb(ndv: int, fpp: float) -> int:
    # ParquetBloomFilter(num_entries, f): b = MaxValue(NextPowerOfTwo(idx_t(m / k)) / 32, 1)
    # blocks of 32 bytes, k = 8. No upper bound.
    m = _raw_bits(ndv, fpp)
    num_blocks = max(_next_power_of_two(_saturating_int(m / 8.0, _RUST_USIZE_MAX)) // 32, 1)
    return BYTES_PER_BLOCK * num_blocks


def clickhouse_num_bytes(
    ndv: int, bits_per_value: float = CLICKHOUSE_DEFAULT_BITS_PER_VALUE
) -> int | None:
    """The bitset size ClickHouse's Parquet writer gives a chunk of ``ndv`` distinct values, or
    None where it writes no filter.

    ``makeBloomFilter`` (``Write.cpp``) counts the chunk's distinct XXH64 hashes (nulls are not
    hashed), asks for ``ndv * bits_per_value / 256`` blocks (in double precision) and takes the
    smallest power of two of blocks that is not less than that, from one block (32 bytes) up.
    Past 4 Mi blocks (128 MiB) it gives up: no filter. A chunk without a value (all null, or
    empty) gets no filter either. ``bits_per_value`` is the setting
    ``output_format_parquet_bloom_filter_bits_per_value`` (default 10.5).
    """
    _check_ndv(ndv)
    _check_bits_per_value(bits_per_value)
    if ndv == 0:
        return None
    num_blocks = _clickhouse_blocks(int(ndv), float(bits_per_value))
    return None if num_blocks > CLICKHOUSE_MAX_BLOCKS else num_blocks * BYTES_PER_BLOCK


def _clickhouse_blocks(ndv: int, bits_per_value: float) -> int:
    # `double requested = double(hashes.size()) * bits_per_value / 256`, then doubling a block
    # count from 1 while it is below the request: the smallest power of two >= requested, which
    # frexp gives exactly (requested = m * 2**e with 0.5 <= m < 1) without the loop.
    requested = float(ndv) * bits_per_value / 256.0
    if not math.isfinite(requested):
        raise ValueError(f"ndv * bits_per_value overflows: {ndv} * {bits_per_value}")
    if requested <= 1.0:
        return 1
    mantissa, exponent = math.frexp(requested)
    return 1 << (exponent - 1 if mantissa == 0.5 else exponent)


def expected_num_bytes(
    ndv: int,
    fpp: float,
    flavor: str = "spec",
    *,
    max_bytes: int | None = None,
    bits_per_value: float | None = None,
) -> int:
    """The bitset size, in bytes, that ``flavor``'s writer gives ``ndv`` distinct values at
    false-positive rate ``fpp``, before any folding.

    ``max_bytes`` is parquet-java's ``parquet.bloom.filter.max.bytes`` (default 1 MiB), applied as
    parquet-java applies it (a value outside (32 B, 128 MiB) means 128 MiB, and a maximum that is
    not a power of two is used as it is). For the other flavours, which have no such setting, it
    is an extra cap and must be a power of two in [32 B, 128 MiB].

    For the folding writers (``arrow-cpp``, ``arrow-rs``) this is the size the filter is built at;
    :func:`fold_to_fpp` gives the size it is written at. DuckDB has no upper bound, so its result
    can exceed the 128 MiB that readers accept.

    ``clickhouse`` sizes by bits per distinct value (:func:`clickhouse_num_bytes`), not by a
    rate: ``bits_per_value`` if given (only this flavour takes it), else ClickHouse's default of
    10.5 bits when ``fpp`` is 0.01, the rate ClickHouse documents for that default, else the
    spec formula's bits per value for ``fpp`` (a user's setting; ClickHouse has no rule of its
    own for other rates). Where ClickHouse would write no filter (more than 4 Mi blocks) the
    result is the power of two it would have needed, above 128 MiB, as for DuckDB; ``ndv`` 0
    gives one block, though ClickHouse writes no filter for a chunk without values.
    """
    _check_ndv(ndv)
    _check_fpp(fpp)
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; expected one of {', '.join(FLAVORS)}")
    if bits_per_value is not None and flavor != "clickhouse":
        raise ValueError(f"bits_per_value is ClickHouse's setting; flavor {flavor!r} takes fpp")
    ndv = int(ndv)
    if flavor == "parquet-java":
        if max_bytes is None:
            max_bytes = PARQUET_JAVA_DEFAULT_MAX_BYTES
        _check_int("max_bytes", max_bytes)
        return _parquet_java(ndv, fpp, int(max_bytes))
    if flavor == "spec":
        num_bytes = optimal_num_bytes(ndv, fpp)
    elif flavor == "arrow-cpp":
        num_bytes = _arrow_cpp(ndv, fpp)
    elif flavor == "arrow-rs":
        num_bytes = _arrow_rs(ndv, fpp)
    elif flavor == "duckdb":
        num_bytes = _duckdb(ndv, fpp)
    else:
        if bits_per_value is None:
            bits_per_value = (
                CLICKHOUSE_DEFAULT_BITS_PER_VALUE
                if fpp == DEFAULT_FPP["clickhouse"]
                else spec_bits_per_value(fpp)
            )
        _check_bits_per_value(bits_per_value)
        num_bytes = _clickhouse_blocks(ndv, float(bits_per_value)) * BYTES_PER_BLOCK
    if max_bytes is not None:
        _check_int("max_bytes", max_bytes)
        if not (MIN_NUM_BYTES <= max_bytes <= MAX_NUM_BYTES and max_bytes & (max_bytes - 1) == 0):
            raise ValueError(
                f"max_bytes must be a power of two from {MIN_NUM_BYTES} to {MAX_NUM_BYTES} "
                f"for flavor {flavor!r}, got {max_bytes}"
            )
        num_bytes = min(num_bytes, int(max_bytes))
    return num_bytes


# -- folding -------------------------------------------------------------------------------------


def _folds_for_fill(avg_fill: float, num_blocks: int, fpp: float) -> int:
    """Arrow C++ NumFoldsForTargetFpp / arrow-rs num_folds_for_target_fpp.

    OR-ing two blocks whose bits are each set with probability ``f`` gives a block whose bits are
    set with probability ``1 - (1 - f) ** 2``; a probe tests eight bits of one block. So after
    ``k`` folds the estimated rate is ``(1 - (1 - f) ** (2 ** k)) ** 8``. Both writers compute the
    unset probability by repeated squaring and stop before the first fold that exceeds ``fpp``.
    An empty filter (``avg_fill`` 0) never exceeds it, so it folds to one block, as both writers
    fold an empty filter.
    """
    if num_blocks < 2:
        return 0
    max_folds = num_blocks.bit_length() - 1  # log2 of a power of two (countr_zero)
    folds = 0
    unset = 1.0 - avg_fill
    for _ in range(max_folds):
        unset *= unset
        if math.pow(1.0 - unset, _BITS_SET_PER_BLOCK) > fpp:
            break
        folds += 1
    return folds


def num_folds(filter: SplitBlockBloomFilter, fpp: float) -> int:
    """How many times Arrow C++ and arrow-rs would halve ``filter`` for target rate ``fpp``."""
    _check_filter(filter)
    _check_fpp(fpp)
    return _folds_for_fill(filter.bits_set() / (filter.num_bytes * 8), filter.num_blocks, fpp)


def fold_to_fpp(filter: SplitBlockBloomFilter, fpp: float) -> SplitBlockBloomFilter:
    """``filter`` folded as Arrow C++ (2026) and arrow-rs (>= 58.2) fold before writing.

    From the fraction ``f`` of bits set, fold ``k`` times (OR groups of ``2**k`` adjacent blocks),
    ``k`` the largest with ``(1 - (1 - f) ** (2 ** k)) ** 8 <= fpp``, down to one block at the
    least; an empty filter becomes one empty block. Folding is exact (see
    :meth:`SplitBlockBloomFilter.fold`), so the result is the filter of the same values at the
    smaller size. Returns a new filter; ``filter`` is not changed.
    """
    k = num_folds(filter, fpp)
    return filter.fold(filter.num_bytes >> k) if k else filter.copy()


# Power-of-two filter sizes, as the log2 of their number of blocks: 32 B (one block) to 128 MiB.
_MAX_LOG2_BLOCKS = (MAX_NUM_BYTES // BYTES_PER_BLOCK).bit_length() - 1
_NUM_SIZES = _MAX_LOG2_BLOCKS + 1


def bits_set_by_size(hashes: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """For every power-of-two size, how many bits the filter of ``hashes`` has set.

    Entry ``j`` is for ``2**j`` blocks (``32 * 2**j`` bytes), ``j`` from 0 to 22 (128 MiB). All
    23 sizes come from one sort per word, without building any filter: with ``2**j`` blocks the
    block of a hash is the top ``j`` bits of its high half, so two hashes set the same bit of word
    ``i`` exactly when they agree on that word's bit position and on those ``j`` bits. Sorted by
    (bit position, high half), the hashes that share a bit at size ``2**j`` are neighbours, and
    the bits set are the hashes minus the neighbouring pairs whose high halves share a prefix of
    ``j`` bits or more.
    """
    h = distinct_hashes(hashes)
    counts = np.zeros(_NUM_SIZES, dtype=np.int64)
    if h.size == 0:
        return counts
    high = h >> np.uint64(32)
    key = h.astype(np.uint32)
    for salt in SALT:
        bit = ((key * salt) >> np.uint32(27)).astype(np.uint64)
        ordered = np.sort((bit << np.uint64(32)) | high)  # by bit position, then high half
        same_bit = (ordered[1:] >> np.uint64(32)) == (ordered[:-1] >> np.uint64(32))
        xor = ((ordered[1:] ^ ordered[:-1]) & np.uint64(0xFFFFFFFF))[same_bit]
        # Length of the common prefix of two 32-bit values: 32 minus the bit length of their XOR
        # (frexp's exponent is the bit length, exactly, for integers below 2**53).
        prefix = 32 - np.frexp(xor.astype(np.float64))[1]
        shared = np.bincount(np.minimum(prefix, _NUM_SIZES), minlength=_NUM_SIZES + 1)
        # Pairs sharing at least j prefix bits: a suffix sum over the prefix lengths.
        at_least = np.cumsum(shared[::-1])[::-1]
        counts += h.size - at_least[:_NUM_SIZES]
    return counts


def _expected_bits_set(ndv: int) -> npt.NDArray[np.float64]:
    # One insert sets, in one of z blocks, one of 32 bits in each word: a given bit stays unset
    # with probability 1 - 1 / (32 z) per distinct value.
    z = 2.0 ** np.arange(_NUM_SIZES)
    unset = np.expm1(ndv * np.log1p(-1.0 / (_BITS_PER_WORD * z)))
    return np.asarray(-unset * z * BITS_PER_BLOCK, dtype=np.float64)


def written_num_bytes(
    fpp: float,
    *,
    hashes: npt.ArrayLike | None = None,
    ndv: int | None = None,
    bits_set: npt.ArrayLike | None = None,
) -> dict[int, int]:
    """What a folding writer writes, for every size it may have built the filter at.

    Maps each initial size (a power of two from 32 B to 128 MiB) to the size after
    :func:`fold_to_fpp` at ``fpp``. With ``hashes`` (the chunk's value hashes) the answer is exact;
    with only ``ndv`` it uses the fill that many distinct values are expected to leave, which
    can be off by one halving where the estimate lies on the fold threshold. ``bits_set``, the
    result of :func:`bits_set_by_size` for the hashes, saves recomputing it across calls.
    """
    _check_fpp(fpp)
    if bits_set is not None:
        bits: npt.NDArray[np.float64] = np.asarray(bits_set, dtype=np.float64)
        if bits.shape != (_NUM_SIZES,):
            raise ValueError(f"bits_set must hold {_NUM_SIZES} counts, from bits_set_by_size()")
    elif hashes is not None:
        bits = bits_set_by_size(hashes).astype(np.float64)
    elif ndv is not None:
        _check_ndv(ndv)
        bits = _expected_bits_set(int(ndv))
    else:
        raise TypeError("written_num_bytes() needs hashes, bits_set or ndv")
    out = {}
    for log2_blocks in range(_NUM_SIZES):
        num_blocks = 1 << log2_blocks
        fill = float(bits[log2_blocks]) / (num_blocks * BITS_PER_BLOCK)
        folds = _folds_for_fill(fill, num_blocks, fpp)
        out[num_blocks * BYTES_PER_BLOCK] = (num_blocks >> folds) * BYTES_PER_BLOCK
    return out


def matching_flavors(
    num_bytes: int,
    ndv: int,
    fpp: float,
    *,
    hashes: npt.ArrayLike | None = None,
    bits_set: npt.ArrayLike | None = None,
) -> list[str]:
    """The flavours whose sizing rule, for ``ndv`` distinct values at ``fpp``, gives ``num_bytes``.

    A non-folding flavour matches when :func:`expected_num_bytes` is ``num_bytes``. A folding
    flavour (``arrow-cpp``, ``arrow-rs``) matches when ``num_bytes`` is its initial size for
    ``ndv`` (as versions before folding write it), or what it writes after folding a filter built
    for ``ndv`` *or more* values: a file does not record the NDV its writer was configured with,
    and these writers are usually configured for far more values than a chunk holds (the row
    count, or about a million by default), which folding then undoes. The folded size depends on
    the values: pass the chunk's ``hashes`` (or their :func:`bits_set_by_size`) for an exact
    answer (see :func:`written_num_bytes`).

    A file does not record the ``fpp`` either, so the answer is relative to the one asked about
    (:mod:`parquet_bloom._audit` asks about the writers' defaults).
    """
    _check_int("num_bytes", num_bytes)
    _check_ndv(ndv)
    _check_fpp(fpp)
    if hashes is not None:
        hashes = distinct_hashes(hashes)
    written: dict[int, int] | None = None
    matches = []
    for flavor in FLAVORS:
        initial = expected_num_bytes(ndv, fpp, flavor)
        if initial == num_bytes:
            matches.append(flavor)
        elif flavor in FOLDING_FLAVORS and initial <= MAX_NUM_BYTES:
            if written is None:
                written = written_num_bytes(fpp, hashes=hashes, ndv=ndv, bits_set=bits_set)
            if any(w == num_bytes for size, w in written.items() if size >= initial):
                matches.append(flavor)
    return matches


def distinct_hashes(hashes: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """The distinct values of ``hashes`` (64-bit integers, any shape; signed ones, as JVM tools
    hand them out, are read as their bit pattern), sorted, as uint64.

    A sort and a comparison of neighbours, not ``np.unique``: from numpy 2.3 that hashes its
    input first, and on a million 64-bit hashes takes 10-12x as long as the sort.
    """
    a = np.asarray(hashes).reshape(-1)
    if a.dtype.kind not in "iu" or a.dtype.itemsize != 8:
        if a.size == 0:
            return np.empty(0, dtype=np.uint64)
        raise TypeError(f"hashes must be an array of 64-bit integers, not dtype {a.dtype}")
    ordered = np.sort(a.view(np.uint64))
    if ordered.size < 2:
        return ordered
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


# -- argument checks -----------------------------------------------------------------------------


def _check_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")


def _check_ndv(ndv: object) -> None:
    _check_int("ndv", ndv)
    if ndv < 0:  # type: ignore[operator]
        raise ValueError(f"ndv must be >= 0, got {ndv}")


def _check_fpp(fpp: object) -> None:
    if isinstance(fpp, bool) or not isinstance(fpp, float | int | np.floating):
        raise TypeError(f"fpp must be a float, not {type(fpp).__name__}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be strictly between 0 and 1, got {fpp}")


def _check_bits_per_value(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, float | int | np.floating | np.integer):
        raise TypeError(f"bits_per_value must be a float, not {type(value).__name__}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"bits_per_value must be finite and >= 0, got {value}")


def _check_filter(filter: object) -> None:
    if not isinstance(filter, SplitBlockBloomFilter):
        raise TypeError(f"filter must be a SplitBlockBloomFilter, not {type(filter).__name__}")
