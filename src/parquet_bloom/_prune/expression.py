"""A ``pyarrow.compute.Expression`` as a tree of what Bloom filters can decide.

Reading the filter. A ``pyarrow.compute.Expression`` offers no Python view of its structure, and
its ``str()`` is not a grammar (field names and string literals print unescaped). The structural
route is the one pickling takes: ``Expression.__reduce__`` hands over Arrow C++'s
``compute::Serialize`` buffer, an Arrow IPC file holding one record batch whose schema metadata
lists the expression in prefix order as key/value pairs (``call``/``end`` around arguments,
``field_ref``, ``nested_field_ref`` with a child count, ``literal`` and ``options`` naming a
column of the batch that holds the scalar). The pairs repeat keys, which ``Schema.metadata``
(a dict) loses, so they are read in order through the Arrow C data interface, whose
``ArrowSchema.metadata`` keeps them all. Pickled expressions are read back from this format, so
Arrow keeps it stable; anything in it we do not recognise becomes "unknown" (keep everything).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from parquet_bloom._prune.text import HAS_TOKEN, SUBSTRING_FUNCTIONS, token_of_regex

# -- the filter as a tree --------------------------------------------------------------------


@dataclass(frozen=True)
class Unknown:
    """A part of the filter that Bloom filters cannot decide: any row group might match it."""

    def __repr__(self) -> str:
        return "Unknown()"


UNKNOWN = Unknown()


@dataclass(frozen=True)
class Equal:
    """``column == value``; ``column`` is the field path (``("s", "a")`` for ``s.a``)."""

    column: tuple[str, ...]
    value: pa.Scalar

    @property
    def values(self) -> pa.Array:
        return pa.array([self.value], type=self.value.type)


@dataclass(frozen=True)
class IsIn:
    """``column`` is one of ``values``."""

    column: tuple[str, ...]
    values: pa.Array


@dataclass(frozen=True)
class TextMatch:
    """A case-sensitive string match of ``column``: ``function`` (``match_substring``,
    ``starts_with``, ``ends_with``, ``match_like`` or ``has_token``) with ``pattern`` (the
    token, for has_token). Only a token or n-gram filter decides it."""

    column: tuple[str, ...]
    function: str
    pattern: str


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


Node: TypeAlias = "Unknown | Equal | IsIn | TextMatch | And | Or"


def conjunction(children: Sequence[Node]) -> Node:
    """AND: flattened; an Unknown child constrains nothing and is dropped."""
    flat: list[Node] = []
    for child in children:
        if isinstance(child, And):
            flat.extend(child.children)
        elif not isinstance(child, Unknown):
            flat.append(child)
    if not flat:
        return UNKNOWN
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def disjunction(children: Sequence[Node]) -> Node:
    """OR: flattened; an Unknown child might match anything, and so does the whole."""
    flat: list[Node] = []
    for child in children:
        if isinstance(child, Unknown):
            return UNKNOWN
        flat.extend(child.children if isinstance(child, Or) else (child,))
    if not flat:
        return UNKNOWN
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def translate(expression: pc.Expression) -> Node:
    """The part of ``expression`` that Bloom filters can decide, as a tree.

    Only ``equal`` between a field and a scalar, ``is_in`` on a field, the case-sensitive
    string matches of a field a token or n-gram filter decides (:class:`TextMatch`) and
    AND/OR (Kleene or not) are understood; every other call, and any expression Arrow cannot
    serialize (a field referenced by position), becomes :class:`Unknown`.
    """
    if not isinstance(expression, pc.Expression):
        raise TypeError(
            f"filter must be a pyarrow.compute.Expression, not {type(expression).__name__}"
        )
    try:
        pairs, batch = _serialized(expression)
    except pa.ArrowNotImplementedError:
        return UNKNOWN
    return _parse(pairs, batch)


# -- reading Arrow's serialized expression ---------------------------------------------------

# Keys of compute::Serialize in Arrow C++ (cpp/src/arrow/compute/expression.cc).
_CALL, _END, _OPTIONS = "call", "end", "options"
_LITERAL, _FIELD_REF, _NESTED_FIELD_REF = "literal", "field_ref", "nested_field_ref"
# Function names: the Python operators build the Kleene forms (``&`` -> and_kleene, ``|`` ->
# or_kleene, ``==`` -> equal, ``isin`` -> is_in); "and"/"or" are the plain forms.
_AND_FUNCTIONS = frozenset({"and", "and_kleene"})
_OR_FUNCTIONS = frozenset({"or", "or_kleene"})
_EQUAL_FUNCTION = "equal"
_IS_IN_FUNCTION = "is_in"
# The name SetLookupOptions serializes under, and its field holding the values.
_SET_LOOKUP_OPTIONS = b"SetLookupOptions"
_MATCH_OPTIONS = b"MatchSubstringOptions"
_REGEX_FUNCTION = "match_substring_regex"


class _ArrowSchemaStruct(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface (an ABI-stable layout)."""

    _fields_ = (
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    )


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """A schema's metadata as ordered key/value pairs, repeated keys included.

    C data interface, ``ArrowSchema.metadata``: an int32 count of pairs, then for each an int32
    key length, the key bytes, an int32 value length and the value bytes, in native byte order.
    The capsule owns (and releases) the exported struct, so it must live while we read.
    """
    capsule = schema.__arrow_c_schema__()
    exported = _ArrowSchemaStruct.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    address = exported.metadata
    if not address:
        return []

    def int32(at: int) -> int:
        return int.from_bytes(ctypes.string_at(at, 4), sys.byteorder, signed=True)

    pairs, at = [], address + 4
    for _ in range(int32(address)):
        parts = []
        for _ in range(2):
            length = int32(at)
            parts.append(ctypes.string_at(at + 4, length).decode())
            at += 4 + length
        pairs.append((parts[0], parts[1]))
    return pairs


def _serialized(expression: pc.Expression) -> tuple[list[tuple[str, str]], pa.RecordBatch]:
    _, (buffer,) = expression.__reduce__()
    batch = pa.ipc.open_file(buffer).get_batch(0)
    return _metadata_pairs(batch.schema), batch


@dataclass(frozen=True)
class _Field:
    path: tuple[str, ...]


@dataclass(frozen=True)
class _Literal:
    value: pa.Scalar


_Term: TypeAlias = "_Field | _Literal | Node"


@dataclass
class _OpenCall:
    function: str
    arguments: list[_Term] = field(default_factory=list)
    options: pa.Scalar | None = None


@dataclass
class _OpenNestedRef:
    remaining: int
    path: list[str] = field(default_factory=list)


class _Malformed(Exception):
    """The serialized expression does not have the shape Arrow writes."""


def _parse(pairs: list[tuple[str, str]], batch: pa.RecordBatch) -> Node:
    """Prefix pairs -> tree, with an explicit stack: ``a | b | c | ...`` nests as deep as it
    is long, deeper than Python's recursion limit allows."""

    def scalar(column: str) -> pa.Scalar:
        if not column.isdigit() or int(column) >= batch.num_columns:
            raise _Malformed(f"no column {column!r} in the serialized expression")
        return batch.column(int(column))[0]

    stack: list[_OpenCall | _OpenNestedRef] = []
    done: list[_Term] = []

    def finish(term: _Term) -> None:
        while stack:
            top = stack[-1]
            if isinstance(top, _OpenCall):
                top.arguments.append(term)
                return
            if not isinstance(term, _Field):
                raise _Malformed("a nested field reference holds something else")
            top.path.extend(term.path)
            top.remaining -= 1
            if top.remaining:
                return
            stack.pop()
            term = _Field(tuple(top.path))
        done.append(term)

    try:
        for key, value in pairs:
            if key == _LITERAL:
                finish(_Literal(scalar(value)))
            elif key == _FIELD_REF:
                finish(_Field((value,)))
            elif key == _NESTED_FIELD_REF:
                if not value.isdigit() or int(value) == 0:
                    raise _Malformed(f"nested field reference of {value!r} parts")
                stack.append(_OpenNestedRef(int(value)))
            elif key == _CALL:
                stack.append(_OpenCall(value))
            elif key in (_OPTIONS, _END):
                top = stack[-1] if stack else None
                if not isinstance(top, _OpenCall):
                    raise _Malformed(f"{key!r} outside a call")
                if key == _OPTIONS:
                    top.options = scalar(value)
                else:
                    stack.pop()
                    finish(_call_node(top))
            else:
                raise _Malformed(f"unknown key {key!r}")
        if stack or len(done) != 1:
            raise _Malformed("unterminated expression")
    except _Malformed:
        # Arrow changed its serialization: keep everything rather than guess.
        return UNKNOWN
    return _as_node(done[0])


def _as_node(term: _Term) -> Node:
    # A bare boolean field or literal (``filter=pc.field("flag")``) is not decidable here.
    return UNKNOWN if isinstance(term, _Field | _Literal) else term


def _plain(value: pa.Scalar) -> pa.Scalar:
    """A dictionary-encoded literal as its value: filters hash values, not indices."""
    if not isinstance(value, pa.DictionaryScalar):
        return value
    return value.value if value.is_valid else pa.scalar(None, value.type.value_type)


def _call_node(call: _OpenCall) -> Node:
    args = call.arguments
    if call.function in _AND_FUNCTIONS:
        return conjunction([_as_node(a) for a in args])
    if call.function in _OR_FUNCTIONS:
        return disjunction([_as_node(a) for a in args])
    if call.function == _EQUAL_FUNCTION and len(args) == 2:
        left, right = args
        if isinstance(left, _Literal) and isinstance(right, _Field):
            left, right = right, left
        if isinstance(left, _Field) and isinstance(right, _Literal):
            return Equal(left.path, _plain(right.value))
    if call.function in (*SUBSTRING_FUNCTIONS, _REGEX_FUNCTION):
        return _text_match(call)
    if call.function == _IS_IN_FUNCTION and len(args) == 1 and isinstance(args[0], _Field):
        options = call.options
        value_set = None
        if (
            isinstance(options, pa.StructScalar)
            and "_type_name" in options
            and options["_type_name"].as_py() == _SET_LOOKUP_OPTIONS
            and "value_set" in options
        ):
            value_set = getattr(options["value_set"], "values", None)
        if isinstance(value_set, pa.Array):
            values = value_set
            if isinstance(values, pa.DictionaryArray):
                values = values.dictionary_decode()
            return IsIn(args[0].path, values)
    return UNKNOWN


def _text_match(call: _OpenCall) -> Node:
    """A string match of a field, case-sensitive, as a :class:`TextMatch`; a regular
    expression only in the shape ``has_token`` writes."""
    options = call.options
    if (
        len(call.arguments) != 1
        or not isinstance(call.arguments[0], _Field)
        or not isinstance(options, pa.StructScalar)
        or "_type_name" not in options
        or options["_type_name"].as_py() != _MATCH_OPTIONS
        or options["ignore_case"].as_py() is not False
    ):
        return UNKNOWN
    pattern = options["pattern"].as_py()
    if not isinstance(pattern, str):
        return UNKNOWN
    function = call.function
    if function == _REGEX_FUNCTION:
        token = token_of_regex(pattern)
        if token is None:
            return UNKNOWN
        function, pattern = HAS_TOKEN, token
    return TextMatch(call.arguments[0].path, function, pattern)


def text_matches(node: Node) -> Iterator[TextMatch]:
    """The string matches of the tree (what only a token or n-gram filter decides)."""
    if isinstance(node, TextMatch):
        yield node
    elif isinstance(node, And | Or):
        for child in node.children:
            yield from text_matches(child)


def members(node: Node) -> Iterator[Equal | IsIn]:
    if isinstance(node, Equal | IsIn):
        yield node
    elif isinstance(node, And | Or):
        for child in node.children:
            yield from members(child)


def referenced_columns(expression: pc.Expression) -> frozenset[str] | None:
    """The top-level fields ``expression`` reads, by name; None when that cannot be told: a
    nested field reference, a field referenced by position (which Arrow cannot serialize), or
    a serialization this module does not know."""
    try:
        pairs, _ = _serialized(expression)
    except pa.ArrowNotImplementedError:
        return None
    names = set()
    for key, value in pairs:
        if key == _FIELD_REF:
            names.add(value)
        elif key not in (_CALL, _END, _OPTIONS, _LITERAL):
            return None
    return frozenset(names)
