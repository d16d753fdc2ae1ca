"""What size a filter should have for a number of distinct values, and whether a filter has it.

Pure arithmetic, no file: :func:`advise_size` gives, for ``ndv`` distinct values and a target
rate ``fpp``, what the spec's formula asks for (``ndv * c / 8`` bytes, ``c = -8 / ln(1 - fpp **
(1/8))`` bits a value; docs/format-notes.md#how-writers-size-filters), what each writer's rule
gives (:func:`parquet_bloom._sizing.expected_num_bytes`), the advised size and the rate each
size gives. The advised size is the spec's formula rounded up to a power of two
(:func:`parquet_bloom.optimal_num_bytes`): what :func:`parquet_bloom.rewrite_bloom_filters`
and ``resize`` write by default for a chunk's exact NDV, so that resizing follows the advice.
The formula ignores how unevenly values fall into blocks, so where it lands just below a power
of two the advised size's expected rate (:func:`parquet_bloom._sbbf.expected_fpp`, given with
the advice) can exceed the target by a hair; the advice stays the spec's size, which the check
judges by too (a filter ``resize`` wrote is never flagged).

:func:`size_notes` is the judgement the check makes of a filter it measured: larger than its
distinct count needs at the target (bytes wasted), or too small for it (expected rate above the
target). These are warnings (notes), not violations: a writer may size for a rate of its own
(Arrow's default is 5 %); a rate above ``max_fpp`` measured from the bits set is the violation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parquet_bloom import _sizing as sizing
from parquet_bloom._sbbf import MIN_NUM_BYTES, bits_per_value, expected_fpp
from parquet_bloom._sbbf import optimal_num_bytes as spec_num_bytes

__all__ = ["DEFAULT_TARGET_FPP", "SizeAdvice", "advise_size", "size_notes"]

# The rate the check judges sizes against when no max_fpp is given: the spec writer's and
# parquet-java's default (sizing.DEFAULT_FPP).
DEFAULT_TARGET_FPP = sizing.DEFAULT_FPP["spec"]
# The writers whose rules the advice lists (ClickHouse's is not a rate: left out).
ADVICE_FLAVORS = ("parquet-java", "arrow-cpp", "arrow-rs", "duckdb")


@dataclass(frozen=True)
class SizeAdvice:
    """The sizes for ``ndv`` distinct values at target rate ``fpp``.

    ``spec_bytes``: the spec's formula, unrounded; ``writers``: each writer's rule (flavor ->
    bytes, before any folding; DuckDB's may exceed 128 MiB); ``advised_bytes``: the formula
    rounded up to a power of two (what ``resize`` writes by default), ``advised_fpp`` its
    expected rate; ``half_fpp``: the rate at half the advised size (None
    at 32 bytes), the price of the next size down."""

    ndv: int
    fpp: float
    spec_bytes: float
    advised_bytes: int
    advised_fpp: float
    writers: dict[str, int] = field(default_factory=dict)
    half_fpp: float | None = None


def advise_size(ndv: int, fpp: float) -> SizeAdvice:
    """:class:`SizeAdvice` for ``ndv`` distinct values (an int >= 0) at ``fpp`` (0 < fpp < 1)."""
    advised = spec_num_bytes(ndv, fpp)
    half = advised // 2
    return SizeAdvice(
        ndv=int(ndv),
        fpp=float(fpp),
        spec_bytes=int(ndv) * bits_per_value(fpp) / 8,
        advised_bytes=advised,
        advised_fpp=expected_fpp(ndv, advised),
        writers={f: sizing.expected_num_bytes(ndv, fpp, f) for f in ADVICE_FLAVORS},
        half_fpp=expected_fpp(ndv, half) if half >= MIN_NUM_BYTES else None,
    )


def size_notes(num_bytes: int, ndv: int, fpp: float) -> list[str]:
    """Warnings about a ``num_bytes`` filter holding ``ndv`` distinct values, judged at ``fpp``
    against the advised size: larger (the bytes beyond it are wasted), or smaller (its expected
    rate is above what the advised size gives)."""
    advised = spec_num_bytes(ndv, fpp)
    if num_bytes > advised:
        return [
            f"oversized: {num_bytes:,} bytes for {ndv:,} distinct values, which need "
            f"{advised:,} at fpp {fpp:g}: {num_bytes - advised:,} bytes wasted"
        ]
    if num_bytes < advised:
        return [
            f"undersized: {num_bytes:,} bytes for {ndv:,} distinct values give an expected "
            f"rate of {expected_fpp(ndv, num_bytes):.3g}, over fpp {fpp:g} ({advised:,} "
            "bytes would meet it)"
        ]
    return []
