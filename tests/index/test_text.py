"""Token and n-gram filters in a Bloom index: each row group's filter is the one ClickHouse's
reference build (parquet_bloom.clickhouse) gives for the same values, the slices are those
filters turned sideways, and a prune with the index never loses a row: the pruned scan's rows
equal the unpruned scan's for random logs and random patterns (case, non-ASCII, patterns too
short for a whole token or n-gram)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquet_bloom as pb
from parquet_bloom import index
from parquet_bloom._clickhouse.filters import ClickHouseBloomFilter
from parquet_bloom._clickhouse.tokens import Tokenizer
from parquet_bloom._index import text
from parquet_bloom._prune.expression import TextMatch, Unknown, translate
from parquet_bloom._prune.text import match_tokens

# Characters of log lines: letters, digits, separators, and non-ASCII of 2, 3 and 4 bytes.
ALPHABET = "abcAB019 ./-_%:?=&\\é€𝄞ü"
values_strategy = st.lists(st.none() | st.text(alphabet=ALPHABET, max_size=30), max_size=40)


@settings(max_examples=150, deadline=None)
@given(values=values_strategy, n=st.sampled_from([None, 1, 2, 3, 4]))
def test_row_group_tokens_are_the_tokenizers(values: list[str | None], n: int | None) -> None:
    tok = Tokenizer(n)
    expected = {t for v in values if v is not None for t in tok.tokens(v.encode())}
    assert text.row_group_tokens(pa.array(values, pa.string()), n) == expected
    large = pa.array(values, pa.large_string()).dictionary_encode()
    assert text.row_group_tokens(large, n) == expected
    pairs = text.row_group_pairs(pa.array(values, pa.string()), n, text.HashCache(5))
    want = text.hash_pairs(sorted(expected), 5)
    assert sorted(map(tuple, pairs.tolist())) == sorted(map(tuple, want.tolist()))


@settings(max_examples=100, deadline=None)
@given(
    values=values_strategy,
    n=st.sampled_from([None, 2, 3]),
    size=st.integers(1, 300),
    hashes=st.integers(1, 6),
    seed=st.sampled_from([0, 1, 7, 2**63 + 5]),
)
def test_filter_is_clickhouses(
    values: list[str | None], n: int | None, size: int, hashes: int, seed: int
) -> None:
    spec = text.TextSpec(text.NGRAMBF if n else text.TOKENBF, n, size, hashes, seed)
    tokens = sorted(text.row_group_tokens(pa.array(values, pa.string()), n))
    mine = text.bitset(text.hash_pairs(tokens, seed), spec)
    reference = ClickHouseBloomFilter.build(
        values,
        kind=spec.kind,
        column_type="Nullable(String)",
        num_bytes=size,
        num_hashes=hashes,
        seed=seed,
        ngram_size=n,
    )
    assert mine == reference.to_bytes()


@pytest.mark.parametrize(("n", "size"), [(1, 1), (7, 3), (8, 8), (13, 37), (200, 64)])
def test_slices_are_the_filters_sideways(n: int, size: int) -> None:
    rng = np.random.default_rng(n * size)
    bitsets = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(n)]
    blob = b"".join(text.text_slices(bitsets, size))
    s = (n + 7) // 8
    assert len(blob) == 8 * size * s
    for p in range(8 * size):
        got = np.unpackbits(np.frombuffer(blob[p * s : (p + 1) * s], np.uint8), bitorder="little")
        want = [(b[p // 8] >> (p % 8)) & 1 for b in bitsets]
        assert got[:n].tolist() == want
        assert not got[n:].any()


def test_sizing() -> None:
    size, hashes = text.size_for(1000, 0.001)
    # m = -n ln p / ln 2 ^ 2 = 14,378 bits, k = 10: the 1,800 bytes rounded up to words.
    assert (size, hashes) == (1800, 10)
    assert text.size_for(0, 0.5)[0] >= 8


# -- a log lake ---------------------------------------------------------------------------------

WORDS = ["GET", "POST", "api", "v1", "users", "login", "error", "timeout", "ok", "café", "日本"]


def log_line(rng: random.Random) -> str:
    parts = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:
        parts.append(f"id{rng.randint(0, 5000)}")
    seps = [rng.choice([" ", "/", "?", "=", "-", ".", "_", "%"]) for _ in parts]
    return "".join(p + s for p, s in zip(parts, seps, strict=True))[: rng.randint(0, 60)]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("text-index") / "data"
    root.mkdir()
    rng = random.Random(5)
    lines: list[str] = []
    for i in range(24):
        msgs = [log_line(rng) if rng.random() > 0.05 else None for _ in range(200)]
        lines += [m for m in msgs if m is not None]
        table = pa.table({"msg": pa.array(msgs, pa.string()), "n": np.arange(200) + i * 200})
        pq.write_table(table, root / f"f{i:02d}.parquet", row_group_size=50)
    target = root.parent / "logs.puffin"
    report = index.build_index(
        root,
        [],
        target,
        text=[
            index.TextFilter("msg"),
            index.TextFilter("msg", "ngrambf", n=3, size=512, hashes=2, seed=9),
        ],
    )
    assert report.row_groups == 96
    assert [(t.spec.split("(")[0], t.filtered) for t in report.text] == [
        ("tokenbf_v1", 96),
        ("ngrambf_v1", 96),
    ]
    return root, target, lines


def pattern_of(rng: random.Random, lines: list[str]) -> tuple[str, str]:
    function = rng.choice(["match_substring", "starts_with", "ends_with", "match_like", "token"])
    line = rng.choice(lines) if lines else ""
    start = rng.randint(0, len(line))
    piece = line[start : start + rng.randint(0, 12)]
    if rng.random() < 0.15:
        piece = piece.upper()
    if rng.random() < 0.1:
        piece = f"id{rng.randint(0, 99999)}"  # mostly absent
    if function == "starts_with":
        piece = line[: rng.randint(0, len(line))]
    elif function == "ends_with":
        piece = line[rng.randint(0, len(line)) :]
    elif function == "match_like":
        piece = "".join(c if rng.random() > 0.2 else rng.choice("%_") for c in piece)
        piece = rng.choice(["%", "", "_"]) + piece + rng.choice(["%", ""])
    elif function == "token":
        found = text.row_group_tokens(pa.array([line]), None)
        piece = rng.choice(sorted(found)).decode() if found else "absent"
    return function, piece


def expression(function: str, pattern: str) -> pc.Expression:
    field = pc.field("msg")
    if function == "token":
        return index.has_token("msg", pattern)
    return getattr(pc, function)(field, pattern)


def test_prune_keeps_every_row(lake: tuple[Path, Path, list[str]]) -> None:
    root, target, lines = lake
    full = ds.dataset(root)
    rng = random.Random(11)
    skipped = 0
    with index.BloomIndex(target) as opened:
        for _ in range(150):
            function, pattern = pattern_of(rng, lines)
            expr = expression(function, pattern)
            if rng.random() < 0.2:
                expr = expr & (pc.field("n") > rng.randint(0, 4800))
            if rng.random() < 0.1:
                expr = expr | expression(*pattern_of(rng, lines))
            result = pb.prune(root, expr, index=opened)
            want = full.to_table(filter=expr).sort_by("n")
            assert result.dataset.to_table(filter=expr).sort_by("n").equals(want), (expr, pattern)
            skipped += result.report.row_groups_skipped + 4 * result.report.files_skipped
    assert skipped > 1000  # the index ruled most row groups out for rare tokens


def test_rare_token_reads_few_row_groups(lake: tuple[Path, Path, list[str]]) -> None:
    root, target, lines = lake
    counts: dict[str, int] = {}
    for line in lines:
        for t in {m for m in line.split() if m.startswith("id")}:
            counts[t] = counts.get(t, 0) + 1
    rare = [t for t, c in counts.items() if c == 1 and t[2:].isdigit()]
    token = rare[0]
    expr = pc.match_substring(pc.field("msg"), f" {token} ")
    result = pb.prune(root, expr, index=target)
    kept = result.dataset.to_table(filter=expr)
    assert kept.num_rows == ds.dataset(root).to_table(filter=expr).num_rows
    assert len(result.dataset.files) <= 3
    assert result.report.index_files == 24


def test_token_lookup_reads_its_slices(lake: tuple[Path, Path, list[str]]) -> None:
    _, target, _ = lake
    with index.BloomIndex(target) as opened:
        (spec, ngrams) = opened.text_filters("msg")
        assert spec.kind == "tokenbf_v1" and ngrams.key == "ngrambf_v1(3,512,2,9)"
        before = opened.reads
        found = opened.lookup_tokens("msg", spec, [b"timeout", b"users"])
        assert found.reads == opened.reads - before <= 2  # the slices, then the entries
        assert found.filtered == 96 and found.unfiltered == 0
        everything = opened.lookup_tokens("msg", spec, [b"zzzz-not-there"])
        assert everything.row_groups == [] or len(everything.row_groups) < 3
        assert opened.columns == []  # no equality column
        with pytest.raises(ValueError, match="no ngrambf_v1"):
            opened.lookup_tokens("msg", text.TextSpec("ngrambf_v1", 4, 512, 2, 9), [b"abcd"])


def test_has_token_is_hastoken() -> None:
    rng = random.Random(3)
    values = [log_line(rng) for _ in range(300)] + ["x", "", "idé", "é", None]
    table = pa.table({"msg": pa.array(values, pa.string())})
    for token in ["api", "id1", "é", "GET", "日本", "x", "v1"]:
        got = table.filter(index.has_token("msg", token))["msg"].to_pylist()
        want = [
            v for v in values if v is not None and token.encode() in Tokenizer().tokens(v.encode())
        ]
        assert got == want
    for bad in ["", "a b", "a-b", "%"]:
        with pytest.raises(ValueError, match="not one token"):
            index.has_token("msg", bad)


def test_translate_text_matches() -> None:
    f = pc.field("msg")
    assert translate(pc.match_substring(f, "ab")) == TextMatch(("msg",), "match_substring", "ab")
    assert translate(index.has_token("msg", "ab")) == TextMatch(("msg",), "has_token", "ab")
    assert translate(pc.ends_with(f, "x/")) == TextMatch(("msg",), "ends_with", "x/")
    assert isinstance(translate(pc.match_substring(f, "ab", ignore_case=True)), Unknown)
    assert isinstance(translate(pc.match_substring_regex(f, "a.b")), Unknown)
    assert isinstance(translate(pc.match_substring(pc.field("msg") + "", "x")), Unknown)


@pytest.mark.parametrize(
    ("function", "pattern", "n", "tokens"),
    [
        ("match_substring", "abc", None, []),  # may be part of a longer token at either end
        ("match_substring", " abc def ", None, [b"abc", b"def"]),
        ("starts_with", "abc def", None, [b"abc"]),
        ("ends_with", "abc def", None, [b"def"]),
        ("match_like", "abc%def_ x y%", None, [b"x"]),  # abc% may go on: abcd
        ("match_like", "%ab%", 3, []),  # no literal run of 3
        ("match_substring", "abcd", 3, [b"abc", b"bcd"]),
        ("has_token", "abc", 2, [b"ab", b"bc"]),
    ],
)
def test_match_tokens(function: str, pattern: str, n: int | None, tokens: list[bytes]) -> None:
    assert match_tokens(function, pattern, n) == tokens


def test_refresh_and_compaction_carry_the_filters(tmp_path: Path) -> None:
    """A refresh builds the new files' text filters at the index's shape; a compaction merges
    them (dropping files gone); a file whose column is not strings is a row group without a
    filter, a file without the column has none; a segment without the filter (an index
    refreshed by an older build) returns its files whole."""
    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.table({"msg": ["a timeout b", "c"]}), root / "a.parquet")
    pq.write_table(pa.table({"other": [1, 2]}), root / "b.parquet")
    pq.write_table(pa.table({"msg": [1, 2]}), root / "c.parquet")
    pq.write_table(pa.table({"msg": ["gone timeout"]}), root / "e.parquet")
    target = tmp_path / "idx"
    index.build_index(root, [], target, text=[index.TextFilter("msg", size=64, hashes=3)])
    pq.write_table(pa.table({"msg": ["later timeout", "x"]}), root / "d.parquet", row_group_size=1)
    (root / "e.parquet").unlink()
    assert index.refresh_index(root, target).text[0].filtered == 2
    a, c, d, e = (str(root / f"{x}.parquet") for x in "acde")

    def found(token: bytes) -> dict[str, list[int]]:
        with index.BloomIndex(target) as opened:
            (spec,) = opened.text_filters("msg")
            assert spec.key == "tokenbf_v1(64,3,0)"
            return opened.lookup_tokens("msg", spec, [token]).files()

    assert found(b"timeout") == {a: [0], c: [0], d: [0], e: [0]}
    assert found(b"absent") == {c: [0]}
    compacted = index.compact_index(target, source=root)
    assert [(t.filtered, t.unfiltered) for t in compacted.text] == [(3, 1)]
    assert found(b"timeout") == {a: [0], c: [0], d: [0]}
    assert found(b"x") == {c: [0], d: [1]}
    # A segment without the filter: its files whole, kept so through a compaction.
    pq.write_table(pa.table({"msg": ["f"]}), root / "f.parquet")
    from parquet_bloom._index import build, store
    from parquet_bloom._index.files import dataset_files

    files = [f for f in dataset_files(root, None) if f.key.endswith("f.parquet")]
    name = store.new_segment_name()
    _, segment = build.write_segment(files, [], store.join(str(target), name), None)
    pointer = store.read_pointer(str(target), None)
    assert pointer is not None
    ref = store.SegmentRef(name, segment.size, segment.footer_offset, segment.footer)
    store.write_pointer(
        str(target),
        store.Pointer(pointer.generation + 1, pointer.columns, (*pointer.segments, ref)),
        None,
    )
    f = str(root / "f.parquet")
    assert found(b"absent") == {c: [0], f: [-1]}
    index.compact_index(target)
    assert found(b"absent") == {c: [0], f: [-1]}


def test_bad_text_filters() -> None:
    with pytest.raises(ValueError, match="kind"):
        index.TextFilter("msg", "bloom")
    with pytest.raises(ValueError, match="n is the n-gram"):
        index.TextFilter("msg", "tokenbf", n=3)
    with pytest.raises(ValueError, match="hashes"):
        index.TextFilter("msg", hashes=0)
    with pytest.raises(ValueError, match="twice"):
        index.build_index("x", [], "y.puffin", text=[index.TextFilter("m")] * 2)
    with pytest.raises(ValueError, match="non-empty"):
        index.build_index("x", [], "y.puffin")


def test_with_equality_columns_and_without_index(
    lake: tuple[Path, Path, list[str]], tmp_path: Path
) -> None:
    """Text filters beside an equality column: each answers its own members, AND and OR
    combine them; a prune without an index leaves string matches alone, reading nothing."""
    root, _, lines = lake
    target = tmp_path / "both.puffin"
    index.build_index(root, ["n"], target, from_data="all", text=[index.TextFilter("msg")])
    full = ds.dataset(root)
    with index.BloomIndex(target) as opened:
        assert opened.columns == ["n"] and opened.text_columns == ["msg"]
        assert opened.lookup("n", 4321).files() == {str(root / "f21.parquet"): [2]}
        token = next(t for t in (f"id{i}" for i in range(5000)) if any(t in x for x in lines))
        for expr in [
            index.has_token("msg", token) & (pc.field("n") == 4321),
            index.has_token("msg", token) | (pc.field("n") == 4321),
            index.has_token("msg", token)
            | pc.match_substring(pc.field("msg"), "x", ignore_case=True),
        ]:
            result = pb.prune(root, expr, index=opened)
            want = full.to_table(filter=expr).sort_by("n")
            assert result.dataset.to_table(filter=expr).sort_by("n").equals(want)
    plain = pb.prune(root, pc.match_substring(pc.field("msg"), " timeout "))
    assert plain.report.files == 24 and plain.report.reads == 0
    assert len(plain.dataset.files) == 24


@pytest.mark.parametrize(
    ("drop", "message"), [(True, "has entries but no slices"), (False, "does not match its parts")]
)
def test_a_damaged_text_filter_is_refused(
    lake: tuple[Path, Path, list[str]], tmp_path: Path, drop: bool, message: str
) -> None:
    """A text filter's entries without its slices, or slices whose properties disagree with
    the filter's name, are a CorruptFileError when the index is opened."""
    from parquet_bloom._index import build, layout, puffin
    from parquet_bloom.errors import CorruptFileError

    _, target, _ = lake
    with index.BloomIndex(target) as opened:
        segment = opened.segments[0]
        blobs = [(b, [segment.read_blob(b)]) for b in segment.footer.blobs]
    damaged = []
    for b, data in blobs:
        props = dict(b.properties)
        if b.type == layout.TEXT_SLICES_BLOB and props[layout.KIND] == "tokenbf_v1":
            if drop:
                continue
            props[layout.HASHES] = str(int(props[layout.HASHES]) + 1)
        damaged.append((puffin.BlobMetadata(b.type, 0, b.length, properties=props), data))
    bad = tmp_path / "bad.puffin"
    build.write_blobs(str(bad), damaged, [], None)
    with pytest.raises(CorruptFileError, match=message):
        index.BloomIndex(bad)


PATTERN_ALPHABET = "ab1 .%_\\é€"


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(st.text(alphabet=PATTERN_ALPHABET, max_size=12), min_size=1, max_size=8),
    pattern=st.text(alphabet=PATTERN_ALPHABET, max_size=8),
    n=st.sampled_from([None, 1, 2, 3]),
)
def test_every_match_holds_the_tokens_asked(values: list[str], pattern: str, n: int | None) -> None:
    """The soundness of every decision: each value pyarrow's scan matches holds every token
    (n-gram) the match asks the filter for, escapes, wildcards and non-ASCII included."""
    column = pa.array(values, pa.string())
    for function in ["match_substring", "starts_with", "ends_with", "match_like", "has_token"]:
        if function == "has_token":
            try:
                expr = index.has_token("v", pattern)
            except ValueError:
                continue
            matched = pa.table({"v": column}).filter(expr)["v"].to_pylist()
        else:
            matched = [
                v
                for v, m in zip(
                    values, getattr(pc, function)(column, pattern).to_pylist(), strict=True
                )
                if m
            ]
        asked = set(match_tokens(function, pattern, n))
        for v in matched:
            assert asked <= text.row_group_tokens(pa.array([v]), n), (function, pattern, v)


def test_like_escapes_pyarrow_reads_two_ways_decide_nothing() -> None:
    # pyarrow's starts_with shortcut keeps the backslash of "\1", its regular expression drops it.
    values = pa.array(["11\\1", "111"])
    assert pc.match_like(values, "11\\1%").to_pylist() == [True, False]
    assert pc.match_like(values, "11\\1").to_pylist() == [False, True]
    assert match_tokens("match_like", "11\\1%", 3) == []
    assert match_tokens("match_like", "a\\b c", None) == []
    assert match_tokens("match_like", "a\\%b c", None) == [b"a", b"b", b"c"]


@settings(max_examples=50, deadline=None)
@given(
    tokens=st.lists(st.binary(max_size=16), max_size=60),
    seed=st.sampled_from([0, 3, 2**63, 2**64 - 1]),
)
def test_short_cityhash_is_cityhash(tokens: list[bytes], seed: int) -> None:
    from parquet_bloom._clickhouse.cityhash import (
        city_hash64_with_seed,
        city_hash64_with_seed_short,
    )

    padded = np.frombuffer(b"".join(t.ljust(16, b"\0") for t in tokens), np.uint8).reshape(-1, 16)
    got = city_hash64_with_seed_short(padded, np.array([len(t) for t in tokens], np.int64), seed)
    assert got.tolist() == [city_hash64_with_seed(t, seed) for t in tokens]


def test_a_text_filter_of_a_column_that_holds_no_strings_is_refused(
    lake: tuple[Path, Path, list[str]], tmp_path: Path
) -> None:
    """A token or n-gram filter of a column no file holds as strings (``n``, integers) is
    the caller's mistake, said so: not an index whose every row group is unfiltered."""
    root, _, _ = lake
    target = tmp_path / "numbers.puffin"
    with pytest.raises(ValueError, match=r"'n' .*not strings"):
        index.build_index(root, [], target, text=[index.TextFilter("n")])
    with pytest.raises(ValueError, match=r"'n' .*not strings"):
        index.build_index(
            root, ["n"], target, text=[index.TextFilter("msg"), index.TextFilter("n")]
        )
    assert not target.exists()


def test_a_file_whose_footer_cannot_be_read_is_a_whole_file_to_text_filters(
    tmp_path: Path,
) -> None:
    """A file of the dataset whose footer cannot be read (here encrypted, without keys) is in
    the index as a whole file every lookup returns, with text filters as without; the build
    does not fail on it."""
    root = tmp_path / "lake"
    root.mkdir()
    data = Path(__file__).parents[1] / "encryption" / "data"
    encrypted = root / "encrypted.parquet"
    encrypted.write_bytes((data / "encrypt_columns_and_footer.parquet.encrypted").read_bytes())
    plain = root / "plain.parquet"
    pq.write_table(pa.table({"msg": ["alpha beta", "gamma"]}), plain)
    target = tmp_path / "index.puffin"
    report = index.build_index(root, [], target, text=[index.TextFilter("msg")])
    assert [path for path, _ in report.unreadable] == [str(encrypted)]
    assert [(t.filtered, t.unfiltered) for t in report.text] == [(1, 1)]
    found = index.lookup_text(root, "msg", "beta", index=target)
    assert found.files == {str(encrypted): [-1], str(plain): [0]}
    assert index.lookup_text(root, "msg", "delta", index=target).files == {str(encrypted): [-1]}
