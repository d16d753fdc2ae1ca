"""Java's arithmetic and string encoding, where Hudi's and Paimon's filters depend on them: both
are written in Java, and a filter built here must be the one Java builds, bit for bit."""

from __future__ import annotations

import math

__all__ = ["INT_MAX", "INT_MIN", "java_int", "java_utf8"]

# A Java int's range.
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


def java_int(x: float) -> int:
    """Java's ``(int)`` of a double: NaN is 0, out-of-range values saturate."""
    if math.isnan(x):
        return 0
    return int(max(min(x, INT_MAX), INT_MIN))


def java_utf8(text: str) -> bytes:
    """The bytes Java's UTF-8 encoder gives for a string of the same UTF-16 code units
    (``text.getBytes(StandardCharsets.UTF_8)``; Paimon's ``BinaryString.fromString``):
    surrogate pairs joined into their code point, any other surrogate as ``?``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    out = []
    i, n = 0, len(text)
    while i < n:
        c = ord(text[i])
        if 0xD800 <= c < 0xDC00 and i + 1 < n and 0xDC00 <= ord(text[i + 1]) < 0xE000:
            out.append(chr(0x10000 + ((c - 0xD800) << 10) + (ord(text[i + 1]) - 0xDC00)))
            i += 2
        else:
            out.append("?" if 0xD800 <= c < 0xE000 else text[i])
            i += 1
    return "".join(out).encode("utf-8")
