"""Record keys as Hudi hashes them: Java's UTF-8 bytes of each key, from every kind of input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from parquet_bloom._hudi.keys import encode_keys
from parquet_bloom._java import java_utf8


def test_keys_of_every_kind_give_the_same_bytes() -> None:
    texts = ["k1", "é-ü", "\U0001f600", "x" * 300]
    expected = [t.encode() for t in texts]
    kinds = [
        texts,
        expected,
        np.array(texts),
        np.array(expected),
        np.array(texts, dtype=object),
        pa.array(texts),
        pa.array(texts, pa.large_string()),
        pa.array(expected, pa.binary()),
        pa.array(["skip", *texts]).slice(1),
        pa.chunked_array([texts[:2], texts[2:]]),
        pa.array(texts, pa.string_view()),
        (t for t in texts),
    ]
    for keys in kinds:
        buffer = encode_keys(keys)
        assert [buffer.key(i) for i in range(len(buffer))] == expected, type(keys)


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        (["a", ""], ValueError),
        ([b""], ValueError),
        (["a", None], ValueError),
        (pa.array(["a", None]), ValueError),
        (pa.array([1, 2]), TypeError),
        ([1], TypeError),
        ("abc", TypeError),
        (5, TypeError),
    ],
)
def test_keys_hudi_refuses(keys: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        encode_keys(keys)


def test_surrogates_as_java_encodes_them() -> None:
    assert java_utf8("a\ud800b") == b"a?b"
    assert java_utf8("\udc00") == b"?"
    assert java_utf8("\ud83d\ude00") == "\U0001f600".encode()
    assert java_utf8("\ud83d\ud83d\ude00") == b"?" + "\U0001f600".encode()
