"""String matches a token or n-gram filter decides: the ``has_token`` expression, and the tokens
(or n-grams) that every value matching ``match_substring``, ``starts_with``, ``ends_with``,
``match_like`` or ``has_token`` must hold, as ClickHouse extracts them from a pattern
(docs/index.md#token-and-n-gram-filters).

``has_token(field, token)`` is an ordinary pyarrow expression: a regular expression that matches
a value holding ``token`` as a whole token (bounded by the value's ends or by ASCII bytes other
than letters and digits, as ClickHouse's ``hasToken`` and ``tokenbf_v1`` split), so a scan's rows
are exact with or without an index; prune recognises the expression by its exact shape.
"""

from __future__ import annotations

import re

import pyarrow.compute as pc

from parquet_bloom._clickhouse.tokens import Tokenizer

__all__ = ["SUBSTRING_FUNCTIONS", "has_token", "match_tokens", "token_of_regex"]

# The pyarrow functions whose matches a text filter may rule out (a case-sensitive match).
SUBSTRING_FUNCTIONS = ("match_substring", "starts_with", "ends_with", "match_like")
HAS_TOKEN = "has_token"
# An ASCII byte that is not a letter or a digit: what separates tokens (RE2 class).
_SEPARATOR = r"[\x00-/:-@\[-`{-\x7f]"
_TOKEN = re.compile(r"[0-9A-Za-z\x80-\U0010ffff]+")
_REGEX = re.compile(
    "^" + re.escape(f"(?:^|{_SEPARATOR})") + "(.+)" + re.escape(f"(?:$|{_SEPARATOR})") + "$",
    re.DOTALL,
)
_ESCAPED = re.compile(r"\\Q(.*)\\E", re.DOTALL)


def has_token(field: str | pc.Expression, token: str) -> pc.Expression:
    """An expression true for the values that hold ``token`` as a whole token: ``token`` (ASCII
    letters and digits, and any non-ASCII character) with the value's start or an ASCII byte
    other than a letter or digit on each side, as ClickHouse's ``hasToken`` matches. NULL for a
    NULL value. A token or n-gram filter of the column decides it in ``prune``.

    Raises ValueError for a token that is empty or holds a separator."""
    if not isinstance(token, str):
        raise TypeError(f"the token must be a str, not {type(token).__name__}")
    if not _TOKEN.fullmatch(token) or "\\E" in token:
        raise ValueError(
            f"{token!r} is not one token: a token is ASCII letters and digits and non-ASCII "
            "characters, with no other ASCII character"
        )
    ref = pc.field(field) if isinstance(field, str) else field
    pattern = f"(?:^|{_SEPARATOR})\\Q{token}\\E(?:$|{_SEPARATOR})"
    return pc.match_substring_regex(ref, pattern)


def token_of_regex(pattern: str) -> str | None:
    """The token of a ``has_token`` expression's pattern, or None for any other pattern."""
    found = _REGEX.match(pattern)
    if found is None:
        return None
    inner = _ESCAPED.fullmatch(found.group(1))
    if inner is None or not _TOKEN.fullmatch(inner.group(1)):
        return None
    return inner.group(1)


def _odd_escape(pattern: str) -> bool:
    """Whether a LIKE pattern has a backslash before anything but ``%``, ``_`` or a backslash
    (or at its end). pyarrow reads such an escape one way in its prefix, suffix and substring
    shortcuts (the backslash kept) and another in its regular expression (dropped), so no
    token can be relied on."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in "%_\\":
                return True
            i += 1
        i += 1
    return False


def match_tokens(function: str, pattern: str, ngram: int | None) -> list[bytes]:
    """The tokens (``ngram`` None) or n-grams every value matching ``function(value, pattern)``
    holds, as ClickHouse's text indexes extract them (tokens touching an open end of the
    pattern are not whole tokens of the value; a LIKE's wildcards open both sides; a LIKE
    pattern escaping another character than ``%``, ``_`` or a backslash gives none). Empty: the
    filter cannot decide it."""
    tok = Tokenizer(ngram)
    data = pattern.encode()
    if function == HAS_TOKEN:
        return tok.tokens(data)
    if function == "match_substring":
        return tok.substring_tokens(data, False, False)
    if function == "starts_with":
        return tok.substring_tokens(data, True, False)
    if function == "ends_with":
        return tok.substring_tokens(data, False, True)
    if function == "match_like":
        return [] if _odd_escape(pattern) else tok.like_tokens(data)
    raise ValueError(f"no tokens for function {function!r}")
