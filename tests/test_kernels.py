"""The compiled kernels themselves: that they are built where they can be, that they can be
turned off, and that they refuse to read or write outside the buffers they are given.

What they compute is tested in test_sbbf.py, test_plain.py, test_pages.py and
test_logical.py, whose every test runs with them and on numpy alone; here, also where the
PLAIN strings of a page lie when it is cut short anywhere, rows of every width hashed in place,
and find's two loops (AVX2 and scalar) against the spec's reference and numpy's find.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import kernels
from tests import skips
from tests.reference import ReferenceFilter


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
def test_byte_arrays_of_a_page_cut_anywhere(values: list[bytes], data: st.DataObject) -> None:
    # PLAIN BYTE_ARRAY (docs/format-notes.md, pages): each value behind its 4-byte little-endian
    # length. Whole, the hashes are the values' (short ones at the end of the page or not);
    # cut short anywhere, the values run past the end.
    if not skips.kernels_built():
        pytest.skip(skips.KERNELS_NOT_BUILT)
    from parquet_bloom import _kernels

    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    out = np.zeros(len(values), dtype=np.uint64)
    used = _kernels.xxh64_byte_arrays(np.frombuffer(page, np.uint8), len(values), out)
    assert used == len(page)
    assert out.tolist() == [xxhash.xxh64_intdigest(v) for v in values]
    if values:
        cut = data.draw(st.integers(0, len(page) - 1))
        with pytest.raises(ValueError, match=f"runs past the {cut} bytes"):
            _kernels.xxh64_byte_arrays(np.frombuffer(page[:cut], np.uint8), len(values), out)


def test_short_byte_arrays_hash_as_xxhash_does(compiled: ModuleType) -> None:
    # Values under 16 bytes take a loop of their own, which reads the byte after the value:
    # every length, every number of bytes left after the 8- and 4-byte steps, the last value
    # of the page (nothing after it) and values in the middle of it.
    values = [bytes(range(40 + n, 40 + 2 * n)) for n in range(20)] * 2
    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    out = np.zeros(len(values), dtype=np.uint64)
    for end in range(len(values) + 1):  # the page ends after value end - 1
        size = sum(4 + len(v) for v in values[:end])
        assert compiled.xxh64_byte_arrays(np.frombuffer(page[:size], np.uint8), end, out) == size
        assert out[:end].tolist() == [xxhash.xxh64_intdigest(v) for v in values[:end]]


@pytest.mark.parametrize("seed", range(3))
def test_pages_of_strings_of_every_length_hash_as_xxhash_does(
    vector_loops: bool, compiled: ModuleType, seed: int
) -> None:
    # Short values are hashed eight at a time where the CPU has AVX-512: groups of all-short
    # values, groups with a long one (one by one), a group whose last value ends less than 16
    # bytes before the page does (one by one), and the values after the last whole group.
    rng = np.random.default_rng(seed)
    lengths = np.where(
        rng.random(1000) < 0.8, rng.integers(0, 16, 1000), rng.integers(16, 70, 1000)
    )
    values = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    out = np.zeros(len(values), dtype=np.uint64)
    for count in (len(values), 8, 9, 15, 16, 17, 3, 0):
        size = sum(4 + len(v) for v in values[:count])
        data = np.frombuffer(page[:size], np.uint8)
        assert compiled.xxh64_byte_arrays(data, count, out) == size
        assert out[:count].tolist() == [xxhash.xxh64_intdigest(v) for v in values[:count]]


def test_byte_arrays_need_room_and_a_count(compiled: ModuleType) -> None:
    page = np.frombuffer(b"\xff\xff\xff\xffab", np.uint8)  # a length of 4 GiB - 1
    room = np.zeros(2, dtype=np.uint64)
    with pytest.raises(ValueError, match="value 0 of 1 runs past the 6 bytes"):
        compiled.xxh64_byte_arrays(page, 1, room)
    with pytest.raises(ValueError, match="do not fit"):
        compiled.xxh64_byte_arrays(page, 3, room)
    with pytest.raises(ValueError, match="do not fit"):
        compiled.xxh64_byte_arrays(page, -1, room)
    assert compiled.xxh64_byte_arrays(page, 0, room) == 0
    two = b"\x02\0\0\0ab\x01\0\0\0c"
    for cut in range(len(two)):  # every cut, inside a length or inside a value
        index = 0 if cut < 6 else 1
        with pytest.raises(ValueError, match=f"value {index} of 2 runs past the {cut} bytes"):
            compiled.xxh64_byte_arrays(np.frombuffer(two[:cut], np.uint8), 2, room)


def test_rows_of_every_width_hash_as_xxhash_does(compiled: ModuleType) -> None:
    # 4- and 8-byte rows (INT32, INT64, FLOAT, DOUBLE) take loops of their own; every width
    # around them and the stripe sizes of XXH64 (32 bytes), rows apart or back to back.
    data = np.random.default_rng(5).integers(0, 256, 4000, dtype=np.uint8)
    for width in [*range(0, 41), 63, 64, 65]:
        for stride in {width, width + 3}:
            count = min(20, (data.size - 7 - width) // max(stride, 1) + 1)
            out = np.zeros(count, dtype=np.uint64)
            compiled.xxh64_rows(data, 7, stride, width, count, out)
            rows = [data[7 + i * stride : 7 + i * stride + width] for i in range(count)]
            assert out.tolist() == [xxhash.xxh64_intdigest(r.tobytes()) for r in rows], width


@pytest.fixture(params=["vector", "scalar"])
def vector_loops(request: pytest.FixtureRequest, compiled: ModuleType) -> Iterator[bool]:
    """The kernels with their vector loops (find and insert with AVX2, short strings' hashes
    with AVX-512, where the CPU has them; the scalar loops elsewhere), then with the scalar
    ones; yields whether the AVX2 loops are on."""
    used = compiled.set_vector_path(request.param == "vector")
    assert used <= (request.param == "vector")  # never on when asked to be off
    try:
        yield used
    finally:
        compiled.set_vector_path(True)  # as the module loads: on where the CPU has it


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def test_the_avx2_loop_is_used_where_the_cpu_has_avx2(compiled: ModuleType) -> None:
    # Where Linux tells: a dispatch that never picked the AVX2 loop would pass every other test.
    flags = _cpu_flags()
    has_avx2 = flags is not None and "avx2" in flags
    on_x86 = platform.machine().lower() in ("x86_64", "amd64")
    try:
        used = compiled.set_vector_path(True)
        assert compiled.set_vector_path(False) is False
    finally:
        compiled.set_vector_path(True)
    if flags is not None:
        assert used == (has_avx2 and on_x86)


EDGE_HASHES = np.array([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 2**32, 2**64 - 1], dtype=np.uint64)


@pytest.mark.parametrize("num_bytes", [32, 64, 1024, 1 << 20])
@pytest.mark.parametrize("fill", [0, 1, 8, 64])
def test_find_matches_the_reference(
    vector_loops: bool, compiled: ModuleType, num_bytes: int, fill: int
) -> None:
    # Filters from empty to saturated (fill: hashes inserted a block), probes spread over every
    # block plus the edges of the block index and the key; one byte out a probe, 1 or 0.
    rng = np.random.default_rng(num_bytes + fill)
    inserted = rng.integers(0, 2**64, fill * num_bytes // 32, dtype=np.uint64)
    ref = ReferenceFilter(num_bytes)
    for h in inserted.tolist():
        ref.insert(h)
    words = np.frombuffer(ref.to_bytes(), dtype="<u4").reshape(-1, 8)
    probes = np.concatenate(
        [inserted[:500], rng.integers(0, 2**64, 3000, dtype=np.uint64), EDGE_HASHES]
    )
    out = np.full(probes.size, 7, dtype=np.uint8)
    compiled.find(words, probes, out)
    assert out.tolist() == [int(ref.find(h)) for h in probes.tolist()]


@pytest.mark.parametrize("num_bytes", [32, 64, 1024, 1 << 20])
def test_insert_matches_the_reference(
    vector_loops: bool, compiled: ModuleType, num_bytes: int
) -> None:
    # Each loop (AVX2 where the CPU has it, scalar): the reference's bits, from an empty filter
    # to a saturated one, the edges of the block index and the key included.
    rng = np.random.default_rng(num_bytes)
    hashes = np.concatenate([rng.integers(0, 2**64, num_bytes, dtype=np.uint64), EDGE_HASHES])
    ref = ReferenceFilter(num_bytes)
    words = np.zeros(num_bytes // 4, dtype="<u4")
    for start in (0, 1, 17, hashes.size):  # calls of every length, short of and past the prefetch
        for h in hashes[:start].tolist():
            ref.insert(h)
        compiled.insert(words, hashes[:start])
        assert words.tobytes() == ref.to_bytes(), start
        hashes = hashes[start:]


def test_find_agrees_with_numpy_on_the_largest_filter(
    vector_loops: bool, compiled: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 128 MiB, 4 Mi blocks: block indexes up to the last block, offsets up to the last byte.
    f = pb.SplitBlockBloomFilter(128 << 20)  # the largest any reader takes
    rng = np.random.default_rng(1)
    inserted = rng.integers(0, 2**64, 200_000, dtype=np.uint64)
    inserted[::3] |= np.uint64(0xF000_0000_0000_0000)  # a third in the last 1/16 of the blocks
    crowd = np.uint64(0xFFFE_0000_0000_0000)  # the last 128 blocks: 5000 hashes, ~39 a block
    f.insert_hashes(inserted)
    f.insert_hashes(rng.integers(0, 2**64, 5000, dtype=np.uint64) | crowd)
    f.insert_hashes(EDGE_HASHES)
    others = rng.integers(0, 2**64, 200_000, dtype=np.uint64)
    probes = np.concatenate([inserted[:1000], others[:4000] | crowd, others, EDGE_HASHES])
    out = np.empty(probes.size, dtype=bool)
    compiled.find(f.words, probes, out)
    assert out[:1000].all() and out[-len(EDGE_HASHES) :].all()
    assert 0 < out[1000:5000].sum() < 1000  # in a crowded block, 6 % of other hashes pass
    monkeypatch.setattr(kernels, "compiled", None)
    assert np.array_equal(out, f.find_hashes(probes))
    assert out[:50].tolist() == [f.find_hash(h) for h in probes[:50].tolist()]


def test_find_of_no_hashes(vector_loops: bool, compiled: ModuleType) -> None:
    words = np.full((1, 8), 0xFFFFFFFF, dtype=np.uint32)
    compiled.find(words, np.empty(0, dtype=np.uint64), np.empty(0, dtype=bool))
    compiled.find(words, b"", bytearray())


def test_find_refuses_buffers_of_the_wrong_size_or_kind(compiled: ModuleType) -> None:
    words = np.full((4, 8), 0xFFFFFFFF, dtype=np.uint32)
    hashes = np.arange(6, dtype=np.uint64)
    out = np.zeros(6, dtype=bool)

    def refused(error: type[Exception], match: str, *args: object) -> None:
        with pytest.raises(error, match=match):
            compiled.find(*args)
        assert not out.any()  # refused before writing anything

    refused(ValueError, "a filter of 0 bytes is not whole blocks", words[:0], hashes, out)
    refused(
        ValueError, "a filter of 48 bytes is not whole blocks", words.reshape(-1)[:12], hashes, out
    )
    refused(
        ValueError, "12 bytes are not whole 64-bit hashes", words, hashes.view(np.uint32)[:3], out
    )
    refused(
        ValueError,
        r"6 hashes need an output of 6 bytes \(one a hash\), not 5",
        words,
        hashes,
        out[:5],
    )
    refused(ValueError, "not 7", words, hashes, np.zeros(7, dtype=bool))
    refused(ValueError, "0 hashes need an output of 0 bytes", words, hashes[:0], out)
    refused(ValueError, "not 48", words, hashes, np.zeros(6, dtype=np.int64))  # not bytes
    refused(ValueError, "contiguous", words, hashes[::2], out[:3])
    refused(ValueError, "contiguous", words[:, ::2], hashes, out)
    refused(TypeError, "read-write", words, hashes, bytes(6))
    refused(TypeError, "bytes-like", words, hashes.tolist(), out)
    refused(TypeError, "bytes-like", "words", hashes, out)
    refused(TypeError, "takes exactly 3 arguments|expected 3 arguments", words, hashes)
    compiled.find(words, hashes, out)  # and the right ones are taken
    assert out.all()


def test_find_releases_the_gil(compiled: ModuleType) -> None:
    # With a switch interval longer than the test, a thread that holds the GIL keeps it until it
    # blocks or ends: this thread can run while the worker is still probing only if find let
    # go of the GIL (as every kernel does, so that threads probe filters in parallel).
    words = np.full((1 << 10, 8), 0xFFFFFFFF, dtype=np.uint32)
    hashes = np.arange(1 << 20, dtype=np.uint64)
    out = np.empty(hashes.size, dtype=bool)
    started, finished = threading.Event(), threading.Event()

    def probe() -> None:
        started.set()
        for _ in range(20):
            compiled.find(words, hashes, out)
        finished.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        worker = threading.Thread(target=probe)
        worker.start()
        started.wait()
        ran_while_probing = not finished.is_set()
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert ran_while_probing
    assert out.all()
