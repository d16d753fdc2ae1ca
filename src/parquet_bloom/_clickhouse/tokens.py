"""The tokenizers of ``tokenbf_v1`` (split by non-alphanumeric ASCII) and ``ngrambf_v1``
(n code points), as ``src/Interpreters/ITokenizer.cpp`` splits strings: a row's value, an
exact literal (``stringToBloomFilter``), a ``LIKE`` pattern (``stringLikeToBloomFilter``) and a
substring (``substringToBloomFilter``, for startsWith, endsWith and multiSearchAny).
"""

from __future__ import annotations

__all__ = ["Tokenizer"]


def _seq_length(byte: int) -> int:
    """UTF8::seqLength: the length of a UTF-8 sequence by its first byte (1 for stray bytes)."""
    if byte < 0x80:
        return 1
    if byte < 0xE0:
        return 2 if byte >= 0xC0 else 1
    if byte < 0xF0:
        return 3
    if byte < 0xF8:
        return 4
    if byte < 0xFC:
        return 5
    if byte < 0xFE:
        return 6
    return 1


def _is_separator(byte: int) -> bool:
    """SplitByNonAlpha: ASCII bytes other than letters and digits separate tokens; bytes of
    0x80 and up belong to tokens."""
    return byte < 0x80 and not (
        0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A
    )


class Tokenizer:
    """``ngram_size`` None: tokenbf_v1's split by non-alphanumeric; else ngrambf_v1's n-grams."""

    def __init__(self, ngram_size: int | None = None) -> None:
        if ngram_size is not None and ngram_size < 1:
            raise ValueError("an n-gram is at least 1 code point long")
        self.n = ngram_size

    # -- tokens of a whole string -----------------------------------------------------------

    def _spans(self, data: bytes) -> list[tuple[int, int]]:
        """(start, length) of each token of ``data`` (``nextInString`` until it stops)."""
        spans: list[tuple[int, int]] = []
        length = len(data)
        pos = 0
        if self.n is None:
            while pos < length:
                while pos < length and _is_separator(data[pos]):
                    pos += 1
                start = pos
                while pos < length and not _is_separator(data[pos]):
                    pos += 1
                if pos == start:
                    break
                spans.append((start, pos - start))
            return spans
        n = self.n
        while pos < length:
            start, size, points = pos, 0, 0
            while points < n and start + size < length:
                size += _seq_length(data[start + size])
                points += 1
            size = min(size, length - start)
            pos += _seq_length(data[pos])
            if points != n:
                break
            spans.append((start, size))
        return spans

    def tokens(self, data: bytes) -> list[bytes]:
        """The tokens of a value or an exact literal."""
        return [data[s : s + n] for s, n in self._spans(data)]

    def substring_tokens(self, data: bytes, is_prefix: bool, is_suffix: bool) -> list[bytes]:
        """The tokens a substring of a value must hold: for tokenbf, a token touching the start
        (end) counts only when the substring is a prefix (suffix)."""
        if self.n is not None:
            return self.tokens(data)
        return [
            data[s : s + n]
            for s, n in self._spans(data)
            if (s > 0 or is_prefix) and (s + n < len(data) or is_suffix)
        ]

    def like_tokens(self, pattern: bytes) -> list[bytes]:
        """The tokens every value matching the ``LIKE`` pattern holds."""
        out: list[bytes] = []
        pos = 0
        length = len(pattern)
        while pos < length:
            found, token, pos = self._next_like(pattern, pos)
            if not found:
                break
            out.append(token)
        return out

    def _next_like(self, data: bytes, pos: int) -> tuple[bool, bytes, int]:
        length = len(data)
        if self.n is None:
            token = bytearray()
            bad = escaped = False
            while pos < length:
                c = data[pos]
                if not escaped and c in (0x25, 0x5F):  # % _
                    token.clear()
                    bad = True
                    pos += 1
                elif not escaped and c == 0x5C:  # backslash
                    escaped = True
                    pos += 1
                elif _is_separator(c):
                    if not bad and token:
                        return True, bytes(token), pos + 1
                    token.clear()
                    bad = escaped = False
                    pos += 1
                else:
                    sz = _seq_length(c)
                    for _ in range(sz):
                        if pos >= length:
                            break
                        token.append(data[pos])
                        pos += 1
                    escaped = False
            return (not bad and bool(token)), bytes(token), pos
        n = self.n
        token = bytearray()
        points = 0
        escaped = False
        i = pos
        while i < length:
            c = data[i]
            if escaped and c in (0x25, 0x5F, 0x5C):
                token.append(c)
                points += 1
                escaped = False
                i += 1
            elif not escaped and c in (0x25, 0x5F):
                token.clear()
                points = 0
                escaped = False
                i += 1
                pos = i
            elif not escaped and c == 0x5C:
                escaped = True
                i += 1
            else:
                sz = _seq_length(c)
                token += data[i : min(i + sz, length)]
                i += sz
                points += 1
                escaped = False
            if points == n:
                if data[pos] == 0x5C and pos + 1 < length:
                    pos += 1 + _seq_length(data[pos + 1])
                else:
                    pos += _seq_length(data[pos])
                return True, bytes(token), pos
        return False, bytes(token), length
