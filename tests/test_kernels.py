"""The compiled kernels themselves: that they are built where they can be, that they can be
turned off, and that they refuse to read or write outside the buffers they are given.

What they compute is tested in test_sbbf.py, test_plain.py, test_pages.py and
test_logical.py, whose every test runs with them and on numpy alone; here, also where the
PLAIN strings of a page lie when it is cut short anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from parquet_bloom import kernels
from tests import skips


@pytest.fixture
def compiled() -> ModuleType:
    """The extension itself, built, whether or not PARQUET_BLOOM_PURE_PYTHON turns it off."""
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    from parquet_bloom import _kernels

    return _kernels


def test_built_where_a_compiler_is() -> None:
    # setup.py builds them as optional: a C file that stopped compiling would only warn at
    # install time and leave every "compiled" test skipped. Where a compiler exists, it must not.
    if skips.c_compiler() is None:
        pytest.skip(skips.NO_C_COMPILER)
    assert skips.kernels_built()


def _compiled_in_fresh_process(value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != kernels.PURE_PYTHON_VARIABLE}
    if value is not None:
        env[kernels.PURE_PYTHON_VARIABLE] = value
    code = "from parquet_bloom import kernels; print(kernels.compiled is not None)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_environment_variable_turns_them_off(compiled: ModuleType) -> None:
    assert _compiled_in_fresh_process(None) == "True"
    assert _compiled_in_fresh_process("0") == "True"
    assert _compiled_in_fresh_process("1") == "False"


def test_without_the_extension_numpy_does_the_work() -> None:
    # As where it was never built (no compiler, or a zipped package on a Spark executor):
    # importing it fails, and everything still works.
    code = (
        "import sys; sys.modules['parquet_bloom._kernels'] = None\n"
        "import parquet_bloom as pb\n"
        "from parquet_bloom import kernels\n"
        "f = pb.SplitBlockBloomFilter(1024); f.insert([1, 2, 3], physical_type='INT64')\n"
        "print(kernels.compiled, f.might_contain(2, physical_type='INT64'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["None", "True"]


def test_rows_outside_the_buffer_are_refused(compiled: ModuleType) -> None:
    data = np.arange(40, dtype=np.uint8)
    out = np.zeros(8, dtype=np.uint64)
    compiled.xxh64_rows(data, 4, 9, 9, 4, out)  # the last row ends at byte 40 exactly
    assert out[:4].tolist() == [
        xxhash.xxh64_intdigest(data[4 + 9 * i : 13 + 9 * i]) for i in range(4)
    ]
    for offset, stride, width, count in [
        (5, 9, 9, 4),
        (0, 32, 9, 2),
        (0, 9, 41, 1),
        (41, 0, 0, 1),
        (0, 10, 9, 5),
    ]:
        with pytest.raises(ValueError, match="run past the 40 bytes"):
            compiled.xxh64_rows(data, offset, stride, width, count, out)
    with pytest.raises(ValueError, match="do not fit"):
        compiled.xxh64_rows(data, 0, 1, 1, 9, out)
    with pytest.raises(ValueError, match="negative"):
        compiled.xxh64_rows(data, -1, 1, 1, 1, out)
    with pytest.raises(TypeError):
        compiled.xxh64_rows(data, 0, 1, 1, 1, b"read-only output")


def test_spans_outside_the_buffer_are_refused(compiled: ModuleType) -> None:
    data = np.arange(10, dtype=np.uint8)
    out = np.zeros(3, dtype=np.uint64)

    def spans(starts: list[int], lengths: list[int]) -> None:
        compiled.xxh64_spans(data, np.array(starts), np.array(lengths), out)

    spans([0, 10, 3], [10, 0, 7])
    assert out.tolist() == [xxhash.xxh64_intdigest(b) for b in (data, b"", data[3:])]
    with pytest.raises(ValueError, match=r"span 1 \(8 bytes at 3\) lies outside the 10 bytes"):
        spans([0, 3, 0], [1, 8, 1])
    with pytest.raises(ValueError, match="span 0"):
        spans([-1], [1])
    with pytest.raises(ValueError, match="span 2"):
        spans([0, 0, 2], [1, 1, -1])
    with pytest.raises(ValueError, match="span 0"):
        spans([2**62], [2**62])  # start + length would overflow
    with pytest.raises(ValueError, match="of one length"):
        compiled.xxh64_spans(data, np.array([0, 1]), np.array([1]), out)
    with pytest.raises(ValueError, match="do not fit"):
        spans([0, 0, 0, 0], [1, 1, 1, 1])


def test_inserts_need_whole_blocks_and_hashes(compiled: ModuleType) -> None:
    with pytest.raises(ValueError, match="not whole blocks"):
        compiled.insert(np.zeros(12, dtype=np.uint32), np.zeros(1, dtype=np.uint64))
    with pytest.raises(ValueError, match="not whole 64-bit hashes"):
        compiled.insert(np.zeros(8, dtype=np.uint32), np.zeros(3, dtype=np.uint32))
    with pytest.raises(TypeError):
        compiled.insert(np.zeros(8, dtype=np.uint32).tobytes(), np.zeros(1, dtype=np.uint64))


@given(st.lists(st.binary(max_size=40), max_size=20), st.data())
def test_byte_array_spans_of_a_page_cut_anywhere(values: list[bytes], data: st.DataObject) -> None:
    # PLAIN BYTE_ARRAY (docs/format-notes.md, pages): each value behind its 4-byte little-endian
    # length. Whole, the spans are the values'; cut short anywhere, the values run past the end.
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    from parquet_bloom import _kernels

    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    starts = np.zeros(len(values), dtype=np.int64)
    lengths = np.zeros(len(values), dtype=np.int64)
    used = _kernels.byte_array_spans(np.frombuffer(page, np.uint8), len(values), starts, lengths)
    assert used == len(page)
    assert [page[s : s + n] for s, n in zip(starts, lengths, strict=True)] == values
    if values:
        cut = data.draw(st.integers(0, len(page) - 1))
        with pytest.raises(ValueError, match=f"runs past the {cut} bytes"):
            _kernels.byte_array_spans(
                np.frombuffer(page[:cut], np.uint8), len(values), starts, lengths
            )


def test_byte_array_spans_need_room_and_a_count(compiled: ModuleType) -> None:
    page = np.frombuffer(b"\xff\xff\xff\xffab", np.uint8)  # a length of 4 GiB - 1
    room = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="value 0 of 1 runs past the 6 bytes"):
        compiled.byte_array_spans(page, 1, room, room.copy())
    with pytest.raises(ValueError, match="do not fit"):
        compiled.byte_array_spans(page, 3, room, room.copy())
    with pytest.raises(ValueError, match="do not fit"):
        compiled.byte_array_spans(page, -1, room, room.copy())
    assert compiled.byte_array_spans(page, 0, room, room.copy()) == 0
    two = b"\x02\0\0\0ab\x01\0\0\0c"
    for cut in range(len(two)):  # every cut, inside a length or inside a value
        index = 0 if cut < 6 else 1
        with pytest.raises(ValueError, match=f"value {index} of 2 runs past the {cut} bytes"):
            compiled.byte_array_spans(np.frombuffer(two[:cut], np.uint8), 2, room, room.copy())
