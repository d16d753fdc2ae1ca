"""The options every command that reaches object storage takes: ``--storage-option`` (its
values read as the filesystem wants them) and ``--timeout`` / ``--retries`` (the request
budget, :func:`parquet_bloom.request_limits`), for :mod:`parquet_bloom.cli` and its parts; and
the types of the other arguments: rates, counts, sizes, ``--decryption-config``."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from parquet_bloom._io import limits

__all__ = [
    "add_gate_options",
    "add_limit_options",
    "count",
    "decryption_config",
    "fpp",
    "ndv",
    "positive",
    "seconds",
    "storage_option",
]


def storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--storage-option``: ``true``/``false`` become booleans and integers
    integers; a JSON object, array or quoted string (``config_kwargs={"read_timeout": 5}``)
    becomes what it stands for; anything else stays a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if value in ("true", "false"):
        return key, value == "true"
    if re.fullmatch(r"[+-]?\d+", value):
        return key, int(value)
    if value[:1] in ("{", "[", '"'):
        try:
            return key, json.loads(value)
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(f"{key}: {value!r} is not valid JSON: {e}") from None
    return key, value


def seconds(text: str) -> float:
    """``--timeout``: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """``--timeout`` and ``--retries``: the request budget of the command's reads and writes
    on object storage (:func:`parquet_bloom.request_limits`)."""
    p.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="how long a request to a store may wait to connect, then for each next bytes of "
        f"its answer (default {limits.DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--retries",
        type=count,
        metavar="N",
        help="how often a request that timed out or failed in passing is tried again "
        f"(default {limits.DEFAULT_RETRIES})",
    )


def fpp(text: str) -> float:
    """A false-positive rate: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text}")
    return value


def count(text: str) -> int:
    """A count: an integer >= 0 (``--retries``, ``--ndv``, ``--bytes``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_gate_options(p: argparse.ArgumentParser) -> None:
    """``--require`` and ``--allow-empty``: what makes a check fail when filters are missing
    (``check``, ``table check``; parquet_bloom._gate)."""
    p.add_argument(
        "--require",
        action="append",
        metavar="COLUMN",
        help="every chunk of this column must have a filter; one without is a violation "
        "(repeatable; checked even if --column names others)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="pass a run that checked no filter at all (by default it fails: exit 1)",
    )


def ndv(text: str) -> int:
    """``--ndv``: a number of distinct values to size for, at least 1."""
    if (value := count(text)) == 0:
        raise argparse.ArgumentTypeError(
            "0 sizes every filter for no value at all (32 bytes, whatever the chunk holds): "
            "give the number of distinct values to size for, or leave --ndv out to size each "
            "chunk for its own count"
        )
    return value


def positive(text: str) -> int:
    if (value := count(text)) == 0:
        raise argparse.ArgumentTypeError("must be > 0, got 0")
    return value


def decryption_config(path: str) -> Any:
    """The keys in a --decryption-config file (JSON; DecryptionKeys.from_config)."""
    from parquet_bloom._crypto.keys import DecryptionKeys

    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        return DecryptionKeys.from_config(config)
    except (OSError, ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"decryption config {path}: {e}") from None
