"""The library's messages in the command's words: where a message names a Python parameter
(``pass in_place=True``, ``num_bytes must be ...``), the command has a flag, and a user of the
command should read the flag (docs/cli.md#errors).

The library's errors name its parameters and, where the command's way differs, carry both:
``ignore_table=True (--ignore-table)``, ``columns=['b'] (parquet-bloom add --column b)``,
``parquet_bloom.delta.rewrite_bloom_filters (or 'parquet-bloom table add')``.
:func:`in_flags` rewrites a message for the command: such a pair becomes its command half,
and the parameters the command has a flag for become the flag. Words inside a path, a quoted
name or a longer identifier are left alone.
"""

from __future__ import annotations

import re

__all__ = ["in_flags"]

# Not part of a path, a file name or a longer identifier.
_BEFORE = r"(?<![\w/.\-'\"=])"
_AFTER = r"(?![\w/\-'\"])"
# A parameter as a message names it: with an underscore or a value ("storage_options",
# "force=True"); a plain word before a parenthesis is the message's own ("its catalog (...)").
_PARAMETER = r"(?:[a-z]+_[a-z_]*(?:=[^\s()]+)?|[a-z]+=[^\s()]+)"
_PAIRS = [
    # "force=True (parquet-bloom --force)", "columns=['b'] (parquet-bloom add --column b)"
    re.compile(
        _BEFORE + _PARAMETER + r" \((?:parquet-bloom (?=--))?((?:--|parquet-bloom )[^)]*)\)"
    ),
    # "parquet_bloom.delta.rewrite_bloom_filters (or 'parquet-bloom table add')"
    re.compile(r"parquet_bloom\.[\w.]+ \(or ('parquet-bloom [^']*')\)"),
]
# A parameter -> the flag the command has for it.
_WORDS = [
    (re.compile(_BEFORE + r"in_place=True" + _AFTER), "--in-place"),
    (re.compile(_BEFORE + r"ignore_table=True" + _AFTER), "--ignore-table"),
    (re.compile(_BEFORE + r"force=True" + _AFTER), "--force"),
    (re.compile(_BEFORE + r"storage_options=?" + _AFTER), "--storage-option"),
    (re.compile(_BEFORE + r"decryption=(?:DecryptionKeys\(\.\.\.\))?"), "--decryption-config FILE"),
    (
        re.compile(_BEFORE + r"DecryptionKeys\(allow_plaintext_files=True\)"),
        '"allow_plaintext_files": true in the --decryption-config FILE',
    ),
    (re.compile(_BEFORE + r"num_bytes" + _AFTER), "--bytes"),
    (re.compile(_BEFORE + r"tail_size" + _AFTER), "--tail-size"),
    (re.compile(r"^(ndv|fpp|flavor) must"), r"--\1 must"),
    (re.compile(_BEFORE + r"dst" + _AFTER), "DST"),
    (re.compile(_BEFORE + r"src" + _AFTER), "SRC"),
]


def in_flags(message: str) -> str:
    """``message`` with the library's parameters named as the command's flags."""
    for pattern in _PAIRS:
        message = pattern.sub(r"\1", message)
    for word, flag in _WORDS:
        message = word.sub(flag, message)
    return message
