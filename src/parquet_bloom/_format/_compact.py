"""The Thrift compact protocol, as the other codecs of this package use it.

Two decoders live here. Structs the generated bindings describe well (FileMetaData,
OffsetIndex, PageHeader) go through the Thrift runtime, preferably its C decoder
(``thrift.protocol.fastbinary``), which may be missing when thrift was built from an sdist;
the pure-Python protocol then stands in, made to decode strings the same way. The Bloom
filter header goes through :class:`CompactReader`, a small hand-written reader that bounds
exactly how far it reads and tells an unknown union member from garbage.

Every decode treats its input as untrusted: declared lengths are capped so that a hostile
length field cannot make us allocate gigabytes or loop for minutes, and every failure of the
Thrift runtime becomes ``CorruptFileError`` in one place (:func:`decode_untrusted`).

Speed matters because footers of wide, long files are big (10,000 column chunks is a ~1 MB
footer), and a Bloom filter probe needs only a few fields per column chunk. So callers hand
the C decoder a pruned copy of the Thrift specs (:func:`prune`) in which the fields they do
not need are ``None``: the C code then skips them without building Python objects for
statistics, encodings and key-value metadata.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from types import ModuleType
from typing import Any

from thrift.protocol.TCompactProtocol import TCompactProtocol, TCompactProtocolAccelerated
from thrift.transport.TTransport import CReadableTransport, TMemoryBuffer, TTransportBase

from parquet_bloom.errors import CorruptFileError, UnsupportedFileError

try:  # The C extension is optional in the thrift package (built from an sdist).
    from thrift.protocol import fastbinary as _fastbinary_module

    fastbinary: ModuleType | None = _fastbinary_module
except ImportError:  # pragma: no cover - depends on how thrift was installed
    fastbinary = None

# --- Limits for untrusted input ---------------------------------------------------------------
# Thrift length limits, the same defaults as Arrow C++ (ReaderProperties
# thrift_string_size_limit / thrift_container_size_limit), so we accept what Arrow accepts.
# Each decode additionally caps both at the buffer length: every string byte and every
# container element takes at least one byte on the wire, so a larger declared length is
# corrupt, and the decoder never preallocates more than the input could fill.
MAX_THRIFT_STRING_SIZE = 100_000_000
MAX_THRIFT_CONTAINER_SIZE = 1_000_000
# The Thrift runtime's own nesting limit (TProtocolBase.DEFAULT_RECURSION_DEPTH); we apply
# it to the hand-written reader too.
_MAX_THRIFT_DEPTH = 64


# =============================================================================================
# Decoding and encoding with the Thrift runtime
# =============================================================================================


def prune(
    cls: Any, keep: set[str], sub: dict[str, tuple[Any, ...]] | None = None
) -> tuple[Any, ...]:
    """Copy ``cls.thrift_spec`` with the fields not in ``keep`` set to ``None`` and the
    nested struct specs in ``sub`` swapped in.

    ``None`` is what the generated code itself uses for unused field ids, and the C decoder
    skips such fields on the wire without creating any Python objects.
    """
    spec: list[Any] = list(cls.thrift_spec)
    names = {entry[2] for entry in spec if entry is not None}
    unknown = (keep | set(sub or ())) - names
    if unknown:  # a typo or an IDL change must not silently drop a field
        raise AssertionError(f"{cls.__name__} has no fields {sorted(unknown)}")
    for i, entry in enumerate(spec):
        if entry is None:
            continue
        fid, ttype, name, typeargs, default = entry
        if name not in keep:
            spec[i] = None
        elif sub and name in sub:
            if ttype == _TTYPE_LIST:  # (element ttype, [class, spec], immutable)
                etype, (eclass, _), immutable = typeargs
                typeargs = (etype, [eclass, sub[name]], immutable)
            else:  # struct: [class, spec]
                typeargs = [typeargs[0], sub[name]]
            spec[i] = (fid, ttype, name, typeargs, default)
    return tuple(spec)


_TTYPE_LIST = 15  # thrift.Thrift.TType.LIST


def describe(err: BaseException) -> str:
    """An exception of the Thrift runtime as the reason in a CorruptFileError."""
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class CompactProtocolReplacingUtf8(TCompactProtocol):  # type: ignore[misc]
    """The pure-Python decoder, made to decode Thrift ``string`` fields like the C one.

    ``fastbinary`` decodes invalid UTF-8 with U+FFFD replacement characters while the
    pure-Python ``readString`` raises; we want one behaviour whichever is installed, and
    the lenient one: a reader should not reject a file over a mis-encoded column name.
    """

    def readString(self) -> str:
        value: str = self.readBinary().decode("utf-8", errors="replace")
        return value


def decode_untrusted(
    buf: bytes | memoryview,
    cls: Any,
    spec: tuple[Any, ...],
    name: str,
    the_name: str,
    *,
    max_size: int,
) -> Any:
    """Decode a Thrift compact struct from a file, every failure a BloomFilterError.

    ``name`` and ``the_name`` say what the bytes are in messages ("footer", "the Parquet
    footer"); more than ``max_size`` bytes is an ``UnsupportedFileError``.
    """
    data = bytes(buf)
    if len(data) > max_size:
        raise UnsupportedFileError(
            f"{name} of {len(data)} bytes exceeds this library's limit of {max_size} bytes"
        )
    try:
        return _decode_struct(data, cls, spec)
    except Exception as err:
        # The Thrift runtime signals bad input with a zoo of types (EOFError,
        # TProtocolException, TTransportException, UnicodeDecodeError, struct.error,
        # OverflowError, MemoryError, and AssertionError/KeyError/RecursionError in the
        # pure-Python decoder). The call above does nothing but decode these bytes, so any
        # exception from it means they are not a valid struct.
        raise CorruptFileError(f"cannot decode {the_name}: {describe(err)}") from err


def _decode_struct(data: bytes, cls: Any, spec: tuple[Any, ...]) -> Any:
    limit_string = min(MAX_THRIFT_STRING_SIZE, len(data))
    limit_container = min(MAX_THRIFT_CONTAINER_SIZE, len(data))
    transport = TMemoryBuffer(data)
    accelerated = fastbinary
    if accelerated is None:
        proto = CompactProtocolReplacingUtf8(
            transport, string_length_limit=limit_string, container_length_limit=limit_container
        )
        obj = cls()
        obj.read(proto)
        return obj
    proto = TCompactProtocolAccelerated(
        transport, string_length_limit=limit_string, container_length_limit=limit_container
    )
    with gc_paused():
        return accelerated.decode_compact(None, proto, [cls, spec])


class _OneBuffer(TTransportBase, CReadableTransport):  # type: ignore[misc]
    """A transport the C decoder reads one buffer at a time from (``buf``, set per decode)."""

    def __init__(self) -> None:
        self.buf = BytesIO()

    @property
    def cstringio_buf(self) -> BytesIO:
        return self.buf

    def cstringio_refill(self, partialread: bytes, reqlen: int) -> BytesIO:
        raise EOFError()  # the buffer is all there is


class SmallStructs:
    """Decodes structs of one type, each from its own small buffer (a chunk's decrypted
    ColumnMetaData, 100 bytes or so), as :func:`decode_untrusted` does, with the same limits
    and errors, through one C decoder set up once: setting up Thrift's protocol costs more
    than decoding such a struct. The cyclic GC is not paused (a few objects a struct).
    Thread-safe (one decode at a time)."""

    def __init__(
        self, cls: Any, spec: tuple[Any, ...], name: str, the_name: str, *, max_size: int
    ) -> None:
        self._cls, self._spec = cls, spec
        self._name, self._the_name, self._max_size = name, the_name, max_size
        self._lock = threading.Lock()
        self._transport = _OneBuffer()
        self._proto = TCompactProtocolAccelerated(self._transport)
        self._decode = None if fastbinary is None else fastbinary.decode_compact

    def decode(self, buf: bytes | memoryview) -> Any:
        """The struct ``buf`` holds (bytes after it ignored, as decode_untrusted ignores
        them); a CorruptFileError when it is not one."""
        fast, proto = self._decode, self._proto
        if fast is None:  # without the C decoder: as decode_untrusted decodes
            return decode_untrusted(
                buf, self._cls, self._spec, self._name, self._the_name, max_size=self._max_size
            )
        data = bytes(buf)
        if len(data) > self._max_size:
            raise UnsupportedFileError(
                f"{self._name} of {len(data)} bytes exceeds this library's limit of "
                f"{self._max_size} bytes"
            )
        with self._lock:
            self._transport.buf = BytesIO(data)
            # Read by the C decoder at each call, as decode_untrusted sets them.
            proto.string_length_limit = min(MAX_THRIFT_STRING_SIZE, len(data))
            proto.container_length_limit = min(MAX_THRIFT_CONTAINER_SIZE, len(data))
            try:
                return fast(None, proto, [self._cls, self._spec])
            except Exception as err:  # the runtime's zoo of types, as in decode_untrusted
                raise CorruptFileError(f"cannot decode {self._the_name}: {describe(err)}") from err


class StructCursor:
    """Decodes structs at chosen offsets of one buffer with the C decoder, and says where each
    ends: a reader can then decode a big struct's parts one at a time, when it needs them.

    Only with ``fastbinary`` (check :data:`fastbinary` first). Not thread-safe: one position.
    """

    def __init__(self, data: bytes, the_name: str) -> None:
        assert fastbinary is not None, "StructCursor needs thrift's C decoder"
        self._decode = fastbinary.decode_compact
        self._transport = TMemoryBuffer(data)
        # The C decoder reads the transport's BytesIO directly and leaves it where it stopped.
        self._buffer = self._transport.cstringio_buf
        self._proto = TCompactProtocolAccelerated(
            self._transport,
            string_length_limit=min(MAX_THRIFT_STRING_SIZE, len(data)),
            container_length_limit=min(MAX_THRIFT_CONTAINER_SIZE, len(data)),
        )
        self._the_name = the_name
        self.reader = CompactReader(memoryview(data))

    def struct_at(self, pos: int, cls: Any, spec: tuple[Any, ...]) -> tuple[Any, int]:
        """The struct at byte ``pos`` (fields whose spec entry is None skipped) and the offset
        just past it. ``cls`` ``object`` with spec ``()`` skips the whole struct."""
        self._buffer.seek(pos)
        try:
            obj = self._decode(None, self._proto, [cls, spec])
        except Exception as err:  # the runtime's zoo of types, as in decode_untrusted
            raise CorruptFileError(f"cannot decode {self._the_name}: {describe(err)}") from err
        return obj, int(self._buffer.tell())

    def skip_value(self, ctype: int) -> None:
        """Skip the value of wire type ``ctype`` at the reader's position, structs (also as
        list elements) in C."""
        reader = self.reader
        if ctype == CT_STRUCT:
            reader.pos = self.struct_at(reader.pos, object, ())[1]
        elif ctype in (CT_LIST, _CT_SET):
            etype, count = reader.list_header()
            if etype != CT_STRUCT:
                for _ in range(count):
                    reader.skip(etype, 1, in_container=True)
                return
            for _ in range(count):
                reader.pos = self.struct_at(reader.pos, object, ())[1]
        else:
            reader.skip(ctype, 0)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off while many objects are made that none of its runs could free (a
    10,000-chunk footer makes ~50,000): it cuts decode time by roughly a quarter."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def encode_struct(obj: Any, cls: Any, spec: tuple[Any, ...]) -> bytes:
    """Serialize a generated struct with the Thrift compact protocol (fields in id order)."""
    accelerated = fastbinary
    if accelerated is not None:
        out: bytes = accelerated.encode_compact(obj, [cls, spec])
        return out
    transport = TMemoryBuffer()
    obj.write(TCompactProtocol(transport))  # the generated write() is untyped
    value: bytes = transport.getvalue()
    return value


# =============================================================================================
# The hand-written reader
# =============================================================================================

# Thrift compact protocol wire types (thrift/doc/specs/thrift-compact-protocol.md).
_CT_STOP = 0
_CT_BOOL_TRUE = 1
_CT_BOOL_FALSE = 2
_CT_BYTE = 3
_CT_I16 = 4
CT_I32 = 5
CT_I64 = 6
_CT_DOUBLE = 7
_CT_BINARY = 8
CT_LIST = 9
_CT_SET = 10
_CT_MAP = 11
CT_STRUCT = 12
_CT_UUID = 13
_FIXED_SIZE = {_CT_BYTE: 1, _CT_DOUBLE: 8, _CT_UUID: 16}


class Malformed(Exception):
    """The bytes are not valid Thrift compact."""


class Truncated(Malformed):
    """The bytes claim more than the buffer holds."""


class CompactReader:
    """A minimal, bounds-checked Thrift compact protocol reader over a byte buffer."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)

    def byte(self) -> int:
        if self.pos >= self.end:
            raise Truncated(f"truncated at byte {self.pos}")
        value = self.data[self.pos]
        self.pos += 1
        return int(value)

    def advance(self, n: int) -> None:
        if n > self.end - self.pos:
            raise Truncated(f"{n} bytes declared at byte {self.pos}, {self.end - self.pos} left")
        self.pos += n

    def varint(self) -> int:
        result = 0
        for shift in range(0, 70, 7):  # at most 10 bytes encode 64 bits
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise Malformed(f"varint longer than 10 bytes ending at byte {self.pos}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def field_header(self, last_id: int) -> tuple[int, int]:
        """Return (wire type, field id); wire type ``_CT_STOP`` ends the struct."""
        b = self.byte()
        ctype = b & 0x0F
        if ctype == _CT_STOP:
            return _CT_STOP, 0
        delta = b >> 4
        if delta:
            return ctype, last_id + delta
        fid = self.zigzag()
        if not -(2**15) <= fid < 2**15:
            raise Malformed(f"field id {fid} out of i16 range at byte {self.pos}")
        return ctype, fid

    def fields(self, last: int = 0) -> Iterator[tuple[int, int]]:
        """(wire type, field id) of each field of a struct, up to its stop byte; the caller
        reads or skips each value before asking for the next field. ``last``: the id of the
        field before the reader's position (a walk resumed in the middle of a struct)."""
        while True:
            ctype, last = self.field_header(last)
            if ctype == _CT_STOP:
                return
            yield ctype, last

    def skip(self, ctype: int, depth: int, *, in_container: bool = False) -> None:
        """Skip one value of wire type ``ctype``."""
        if ctype in (_CT_BOOL_TRUE, _CT_BOOL_FALSE):
            if in_container:  # in a field header the value is the type itself
                self.advance(1)
        elif ctype in (_CT_I16, CT_I32, CT_I64):
            self.varint()
        elif ctype in _FIXED_SIZE:
            self.advance(_FIXED_SIZE[ctype])
        elif ctype == _CT_BINARY:
            self.advance(self.varint())
        elif ctype in (CT_LIST, _CT_SET):
            self._skip_list(depth)
        elif ctype == _CT_MAP:
            self._skip_map(depth)
        elif ctype == CT_STRUCT:
            self.skip_struct(depth)
        else:
            raise Malformed(f"invalid wire type {ctype} before byte {self.pos}")

    def _check_depth(self, depth: int) -> int:
        if depth >= _MAX_THRIFT_DEPTH:
            raise Malformed(f"nesting deeper than {_MAX_THRIFT_DEPTH} at byte {self.pos}")
        return depth + 1

    def _check_count(self, count: int, etype: int) -> None:
        # Every element takes at least one byte, so a count larger than what is left is
        # corrupt; checking it up front keeps a hostile count from looping at all.
        if count * _FIXED_SIZE.get(etype, 1) > self.end - self.pos:
            raise Truncated(f"{count} elements declared at byte {self.pos} do not fit")

    def list_header(self) -> tuple[int, int]:
        """A list's or set's (element wire type, count), the count checked to fit."""
        b = self.byte()
        etype = b & 0x0F
        count = b >> 4
        if count == 15:
            count = self.varint()
        self._check_count(count, etype)
        return etype, count

    def _skip_list(self, depth: int) -> None:
        depth = self._check_depth(depth)
        etype, count = self.list_header()
        for _ in range(count):
            self.skip(etype, depth, in_container=True)

    def _skip_map(self, depth: int) -> None:
        depth = self._check_depth(depth)
        count = self.varint()
        if count == 0:
            return
        types = self.byte()
        ktype, vtype = types >> 4, types & 0x0F
        self._check_count(2 * count, _CT_BYTE)
        for _ in range(count):
            self.skip(ktype, depth, in_container=True)
            self.skip(vtype, depth, in_container=True)

    def skip_struct(self, depth: int) -> None:
        depth = self._check_depth(depth)
        for ctype, _ in self.fields():
            self.skip(ctype, depth)

    def union_member(self, known: dict[int, str], what: str) -> str:
        """Read a union struct; return the name of the member that is set."""
        depth = self._check_depth(0)
        member: str | None = None
        for ctype, fid in self.fields():
            if member is not None:
                raise Malformed(f"{what} union has more than one member set")
            if fid in known:
                if ctype != CT_STRUCT:
                    raise Malformed(f"{what} member {known[fid]} has wire type {ctype}")
                member = known[fid]
            else:
                member = f"UNKNOWN({fid})"
            self.skip(ctype, depth)
        if member is None:
            raise Malformed(f"{what} union has no member set")
        return member


def varint(n: int) -> bytes:
    """The compact protocol's unsigned varint (ULEB128) of ``n`` >= 0."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
