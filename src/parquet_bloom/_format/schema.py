"""The footer's schema, as the list of its primitive columns (:class:`SchemaLeaf`).

A footer stores its schema as a depth-first flattening of a tree of SchemaElements; readers
need the leaves, in the order of the column chunks, each with its path, its types and the
definition and repetition levels its data pages store. Walking the tree also validates it,
so a schema whose declared child counts do not add up is a ``CorruptFileError`` here rather
than an index error later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parquet_bloom._thrift.parquet import ttypes as _tt
from parquet_bloom.errors import CorruptFileError

# Re-exported generated classes, so other modules never import ``_thrift`` themselves.
Type = _tt.Type
FieldRepetitionType = _tt.FieldRepetitionType


def enum_name(enum_cls: Any, value: int | None) -> str | None:
    """The name of a generated enum's ``value``; "UNKNOWN(n)" for a value newer than the IDL."""
    if value is None:
        return None
    name: str | None = enum_cls._VALUES_TO_NAMES.get(value)
    return name if name is not None else f"UNKNOWN({value})"


@dataclass(frozen=True, slots=True)
class SchemaLeaf:
    """A primitive column of the schema, with its position among the leaves."""

    column_index: int
    path: str  # dotted path_in_schema, e.g. "a.b"; ambiguous if names contain dots
    path_in_schema: tuple[str, ...]  # the unambiguous form of ``path``
    physical_type: str  # Type enum name, e.g. "INT32"; "UNKNOWN(n)" for a newer type
    type_length: int | None
    logical_type: Any | None  # generated LogicalType union instance
    converted_type: str | None  # ConvertedType enum name
    scale: int | None
    precision: int | None
    repetition: str | None  # "REQUIRED", "OPTIONAL", "REPEATED", "VECTOR"; None if unset
    field_id: int | None
    # The levels a data page stores for this leaf (docs/format-notes.md, nested encoding):
    # every non-required element on the path from the root adds one definition level, every
    # repeated one a repetition level. None when an element on the path has no repetition.
    max_definition_level: int | None = None
    max_repetition_level: int | None = None


def schema_leaves(md: _tt.FileMetaData) -> list[SchemaLeaf]:
    """The schema's primitive columns in depth-first order, i.e. the column chunk order.

    The schema is a depth-first flattening of a tree (docs/format-notes.md, schema): the
    first element is the root; a group lists its ``num_children`` and is followed by them.
    Like Arrow C++, an element is a leaf when it has a type and no children, and an element
    without children or type is an empty group.
    """
    schema = md.schema
    if not schema:
        raise CorruptFileError("the Parquet footer has an empty schema")
    n_elements = len(schema)
    root = schema[0]
    if root.name is None:
        raise CorruptFileError("schema element 0 (the root) has no name")
    root_children = _children(root, 0)
    leaves: list[SchemaLeaf] = []
    # (index of the group element, children still to visit, path of the group, its levels)
    stack: list[tuple[int, int, tuple[str, ...], tuple[int, int] | None]] = [
        (0, root_children, (), (0, 0))
    ]
    pos = 1
    while stack:
        parent, remaining, prefix, parent_levels = stack[-1]
        if remaining == 0:
            stack.pop()
            continue
        stack[-1] = (parent, remaining - 1, prefix, parent_levels)
        if pos >= n_elements:
            raise CorruptFileError(
                f"schema element {parent} declares more children than the schema's "
                f"{n_elements} elements hold"
            )
        element = schema[pos]
        name = element.name
        if name is None:
            raise CorruptFileError(f"schema element {pos} has no name")
        path = (*prefix, name)
        levels = _levels(parent_levels, element.repetition_type)
        n_children = _children(element, pos)
        if n_children > 0:
            stack.append((pos, n_children, path, levels))
        elif element.type is not None:
            leaves.append(
                SchemaLeaf(
                    column_index=len(leaves),
                    path=".".join(path),
                    path_in_schema=path,
                    physical_type=enum_name(_tt.Type, element.type) or "",
                    type_length=element.type_length,
                    logical_type=element.logicalType,
                    converted_type=enum_name(_tt.ConvertedType, element.converted_type),
                    scale=element.scale,
                    precision=element.precision,
                    repetition=enum_name(_tt.FieldRepetitionType, element.repetition_type),
                    field_id=element.field_id,
                    max_definition_level=None if levels is None else levels[0],
                    max_repetition_level=None if levels is None else levels[1],
                )
            )
        pos += 1
    if pos != n_elements:
        raise CorruptFileError(
            f"the schema has {n_elements} elements but its tree (from the root's "
            f"{root_children} children) holds only {pos}"
        )
    return leaves


def _levels(parent: tuple[int, int] | None, repetition: int | None) -> tuple[int, int] | None:
    """(max definition level, max repetition level) of an element below ``parent``; None
    below an element without a repetition or with one whose levels we do not know (VECTOR)."""
    kinds = _tt.FieldRepetitionType
    if parent is None or repetition not in (kinds.REQUIRED, kinds.OPTIONAL, kinds.REPEATED):
        return None
    optional = repetition != kinds.REQUIRED
    repeated = repetition == kinds.REPEATED
    return parent[0] + optional, parent[1] + repeated


def _children(element: Any, index: int) -> int:
    n = element.num_children
    if n is None:
        return 0
    if n < 0:
        raise CorruptFileError(f"schema element {index} has {n} children")
    return int(n)


def encoded_path(leaf: SchemaLeaf) -> bytes:
    """``leaf``'s ``path_in_schema`` as writers put it in a column chunk's ColumnMetaData: a
    Thrift compact list of strings (its header, then each string behind its varint length).
    The compiled point lookup (``_kernels_probe.c``) compares a chunk's bytes with it."""
    from parquet_bloom._format._compact import varint

    count = len(leaf.path_in_schema)
    binary = 8  # the compact protocol's type of a string
    head = bytes([count << 4 | binary]) if count < 15 else bytes([0xF0 | binary]) + varint(count)
    names = [name.encode("utf-8") for name in leaf.path_in_schema]
    return head + b"".join(varint(len(name)) + name for name in names)


# -- a leaf's type, as text (the Bloom index keeps it to hash literals as the files do) --------

# The generated code attaches thrift_spec after each class body, which mypy cannot see.
_LOGICAL_TYPE_SPEC: tuple[Any, ...] = _tt.LogicalType.thrift_spec  # type: ignore[attr-defined]
# The fields of a SchemaLeaf that decide how a literal is encoded and hashed.
_TYPE_FIELDS = ("physical_type", "type_length", "converted_type", "scale", "precision")


def leaf_type_properties(leaf: SchemaLeaf) -> dict[str, str]:
    """What decides how ``leaf`` stores values, as strings: its physical type, length, converted
    type, scale and precision (those set), and its logical type (Thrift compact, hex)."""
    from parquet_bloom._format._compact import encode_struct

    out = {
        name: str(getattr(leaf, name)) for name in _TYPE_FIELDS if getattr(leaf, name) is not None
    }
    if leaf.logical_type is not None:
        encoded = encode_struct(leaf.logical_type, _tt.LogicalType, _LOGICAL_TYPE_SPEC)
        out["logical_type"] = encoded.hex()
    return out


def leaf_from_type_properties(path: str, properties: dict[str, str]) -> SchemaLeaf:
    """A leaf named ``path`` of the type :func:`leaf_type_properties` wrote; a value that does
    not decode is a CorruptFileError."""
    from parquet_bloom._format._compact import decode_untrusted

    def number(name: str) -> int | None:
        text = properties.get(name)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise CorruptFileError(f"column {path!r}: {name} {text!r} is not an integer") from None

    logical = None
    if "logical_type" in properties:
        try:
            raw = bytes.fromhex(properties["logical_type"])
        except ValueError:
            raise CorruptFileError(f"column {path!r}: its logical type is not hex") from None
        logical = decode_untrusted(
            raw,
            _tt.LogicalType,
            _LOGICAL_TYPE_SPEC,
            "logical type",
            f"column {path!r}'s logical type",
            max_size=1024,
        )
    physical = properties.get("physical_type")
    if physical is None:
        raise CorruptFileError(f"column {path!r}: no physical type")
    return SchemaLeaf(
        column_index=0,
        path=path,
        path_in_schema=tuple(path.split(".")),
        physical_type=physical,
        type_length=number("type_length"),
        logical_type=logical,
        converted_type=properties.get("converted_type"),
        scale=number("scale"),
        precision=number("precision"),
        repetition=None,
        field_id=None,
    )
