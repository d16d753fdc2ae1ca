"""Decryption keys sent to Spark's executors: checked on the driver that they can travel."""

from __future__ import annotations

from pyspark import cloudpickle

from parquet_bloom._crypto import DecryptionKeys


def executor_keys(decryption: DecryptionKeys | None) -> DecryptionKeys | None:
    """``decryption``, once it is known to pickle as Spark pickles what it sends to the
    executors (cloudpickle): a TypeError naming the part that does not (its key retriever or
    its KMS client), raised on the driver before any job starts, rather than Spark's
    serialization traceback."""
    if decryption is None:
        return None
    if not isinstance(decryption, DecryptionKeys):
        raise TypeError(f"decryption must be a DecryptionKeys, not {type(decryption).__name__}")
    decryption.check_picklable(cloudpickle.dumps, to="Spark's executors")
    return decryption
