"""Reading a pyarrow expression as a tree of what Bloom filters can decide."""

from __future__ import annotations

import functools
import operator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquet_bloom._prune.expression import UNKNOWN, And, Equal, IsIn, Or, translate


def test_translate_reads_equalities_isin_and_boolean_structure() -> None:
    tree = translate(
        ((pc.field("a") == 1) & pc.field("s", "b").isin(["x", "y"])) | (pc.field("c") == "z")
    )
    assert isinstance(tree, Or)
    first, second = tree.children
    assert isinstance(first, And)
    equal, isin = first.children
    assert isinstance(equal, Equal) and equal.column == ("a",) and equal.value.as_py() == 1
    assert isinstance(isin, IsIn) and isin.column == ("s", "b")
    assert isin.values.to_pylist() == ["x", "y"]
    assert isinstance(second, Equal) and second.value.as_py() == "z"


def test_translate_keeps_names_with_dots_apart_from_nested_paths() -> None:
    flat, nested = translate(pc.field("a.b") == 1), translate(pc.field("a", "b") == 1)
    assert isinstance(flat, Equal) and flat.column == ("a.b",)
    assert isinstance(nested, Equal) and nested.column == ("a", "b")


@pytest.mark.parametrize(
    "expression",
    [
        pc.field("a") > 1,
        ~(pc.field("a") == 1),
        pc.field("a") == pc.field("b"),
        pc.field("flag"),
        pc.field(0) == 1,  # a field by position: Arrow cannot serialize it
        (pc.field("a") == 1) | (pc.field("b") > 2),
        pc.field("a").is_null(),
    ],
    ids=str,
)
def test_translate_turns_what_it_cannot_decide_into_unknown(expression: pc.Expression) -> None:
    assert translate(expression) == UNKNOWN


def test_translate_drops_unknown_conjuncts_and_unwraps_dictionaries() -> None:
    tree = translate(
        (pc.field("a") > 1)
        & (pc.field("b") == pa.scalar("x", pa.dictionary(pa.int8(), pa.string())))
    )
    assert isinstance(tree, Equal) and tree.value.type == pa.string()
    isin = translate(pc.field("b").isin(pa.array(["x", "y"]).dictionary_encode()))
    assert isinstance(isin, IsIn) and isin.values.type == pa.string()


def test_translate_handles_chains_deeper_than_the_recursion_limit() -> None:
    chain = functools.reduce(operator.or_, [pc.field("a") == i for i in range(3000)])
    tree = translate(chain)
    assert isinstance(tree, Or) and len(tree.children) == 3000
    assert [c.value.as_py() for c in tree.children if isinstance(c, Equal)] == list(range(3000))


def test_translate_keeps_string_literals_that_look_like_syntax() -> None:
    tricky = 'x") or (b == "y'
    tree = translate(pc.field('we"ird') == tricky)
    assert isinstance(tree, Equal) and tree.column == ('we"ird',) and tree.value.as_py() == tricky
