"""Delta tables for the tests, written by deltalake, with layouts whose pruning is known; a
deletion vector written into a table's log by the Delta protocol (deltalake 1.6.6 reads them
but never writes them: its deletes rewrite files); the log read back as its actions."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

# Rows a row group, rows an append: each append writes one file per partition, of
# ROWS_PER_APPEND / 2 rows in row groups of ROW_GROUP_ROWS.
ROW_GROUP_ROWS = 100
ROWS_PER_APPEND = 1000
APPENDS = 3
# Bloom filters sized for so few false positives that a test's exact counts hold.
WRITER_FPP = 0.0001


def s3_options(endpoint_url: str) -> dict[str, str]:
    """deltalake's storage options for the loopback S3 server."""
    from tests.remote.servers import ACCESS_KEY, REGION, SECRET_KEY

    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
        "aws_conditional_put": "etag",
    }


def rows(first: int, count: int, *, partitioned: bool = True) -> pa.Table:
    """``id`` first..first+count-1, ``key`` "k<id>", ``value`` id / 2, and the partition
    column ``part``: "even" or "odd" by id."""
    ids = list(range(first, first + count))
    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "key": pa.array([f"k{i}" for i in ids]),
        "value": pa.array([i / 2 for i in ids], pa.float64()),
    }
    if partitioned:
        columns["part"] = pa.array(["even" if i % 2 == 0 else "odd" for i in ids])
    return pa.table(columns)


def writer_properties(filters: bool = True) -> Any:
    from deltalake import BloomFilterProperties, ColumnProperties, WriterProperties

    column = (
        ColumnProperties(
            bloom_filter_properties=BloomFilterProperties(True, WRITER_FPP, ROW_GROUP_ROWS)
        )
        if filters
        else None
    )
    return WriterProperties(
        max_row_group_size=ROW_GROUP_ROWS,
        column_properties={"id": column, "key": column} if column is not None else None,
    )


def write(
    uri: str,
    data: pa.Table,
    *,
    mode: str = "append",
    partitioned: bool = True,
    filters: bool = True,
    storage_options: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> None:
    from deltalake import write_deltalake

    write_deltalake(
        uri,
        data,
        mode=mode,  # type: ignore[arg-type]
        partition_by=["part"] if partitioned else None,
        writer_properties=writer_properties(filters),
        storage_options=dict(storage_options) if storage_options else None,
        **kwargs,
    )


def build_history(
    uri: str,
    *,
    partitioned: bool = True,
    filters: bool = True,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Versions 0..2: APPENDS appends of ROWS_PER_APPEND ids each (ids 0..2999; one file per
    partition per append, or one per append unpartitioned); version 3: a delete of ids below
    100 (rewrites version 0's files); version 4: an overwrite of ids >= 2000 by ids
    2000..2499 (replaces version 2's files)."""
    from deltalake import DeltaTable

    for append in range(APPENDS):
        write(
            uri,
            rows(append * ROWS_PER_APPEND, ROWS_PER_APPEND, partitioned=partitioned),
            partitioned=partitioned,
            filters=filters,
            storage_options=storage_options,
        )
    options = dict(storage_options) if storage_options else None
    DeltaTable(uri, storage_options=options).delete(
        "id < 100", writer_properties=writer_properties(filters)
    )
    write(
        uri,
        rows(2000, 500, partitioned=partitioned),
        mode="overwrite",
        predicate="id >= 2000",
        partitioned=partitioned,
        filters=filters,
        storage_options=storage_options,
    )


def commits(root: Path) -> list[Path]:
    return sorted((root / "_delta_log").glob("*.json"))


def actions(commit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]


# -- a deletion vector, by the Delta protocol ("Deletion Vector Format") ---------------------

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
# RoaringBitmapArray's magic number, and the portable Roaring format's cookie for a bitmap
# without run containers (RoaringFormatSpec).
_DV_MAGIC = 1681511377
_ROARING_COOKIE = 12346
_ARRAY_CONTAINER_MAX = 4096


def _z85(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            chunk.append(_Z85[value % 85])
            value //= 85
        out.append("".join(reversed(chunk)))
    return "".join(out)


def _roaring32(values: list[int]) -> bytes:
    containers: dict[int, list[int]] = {}
    for value in sorted(values):
        containers.setdefault(value >> 16, []).append(value & 0xFFFF)
    keys = sorted(containers)
    head = struct.pack("<II", _ROARING_COOKIE, len(keys))
    for key in keys:
        assert len(containers[key]) <= _ARRAY_CONTAINER_MAX
        head += struct.pack("<HH", key, len(containers[key]) - 1)
    offset = len(head) + 4 * len(keys)
    offsets, body = b"", b""
    for key in keys:
        offsets += struct.pack("<I", offset + len(body))
        body += struct.pack(f"<{len(containers[key])}H", *containers[key])
    return head + offsets + body


def deletion_vector(deleted: Iterable[int]) -> dict[str, Any]:
    """An inline deletion vector descriptor deleting the rows ``deleted`` (row indexes)."""
    rows_deleted = sorted(set(deleted))
    high: dict[int, list[int]] = {}
    for row in rows_deleted:
        high.setdefault(row >> 32, []).append(row & 0xFFFFFFFF)
    data = struct.pack("<I", _DV_MAGIC) + struct.pack("<Q", len(high))
    for key in sorted(high):
        data += struct.pack("<I", key) + _roaring32(high[key])
    size = len(data)
    data += b"\0" * (-len(data) % 4)  # Z85 takes whole 4-byte groups
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85(data),
        "sizeInBytes": size,
        "cardinality": len(rows_deleted),
    }


def add_deletion_vector(root: Path, key: str, deleted: Iterable[int]) -> int:
    """Commit, by hand, a deletion vector deleting rows ``deleted`` of the file the log names
    ``key`` (the table must have the deletionVectors feature): a remove of the file and its
    add again, with the vector, as a DELETE commit. The new version."""
    from deltalake import DeltaTable

    version = DeltaTable(str(root)).version()
    add = None
    for commit in commits(root):
        for action in actions(commit):
            if "add" in action and action["add"]["path"] == key:
                add = action["add"]
    assert add is not None, key
    now = int(time.time() * 1000)
    vector = deletion_vector(deleted)
    remove = {
        "path": key,
        "dataChange": True,
        "deletionTimestamp": now,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
    }
    info = {
        "timestamp": now,
        "operation": "DELETE",
        "operationParameters": {"predicate": "[rows by hand]"},
        "readVersion": version,
    }
    new = dict(add, dataChange=True, deletionVector=vector, modificationTime=now)
    lines = [{"commitInfo": info}, {"remove": remove}, {"add": new}]
    path = root / "_delta_log" / f"{version + 1:020d}.json"
    with path.open("x") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))
    return version + 1
