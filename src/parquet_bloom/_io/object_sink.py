"""Output to object stores: an object that appears only when complete.

- :class:`S3Sink`: an S3 object sent when complete, in one PutObject or in a multipart upload
  completed only after every part succeeded and aborted on any failure. Long unchanged ranges
  of a source object on the same endpoint are copied by the store (UploadPartCopy), so that a
  rewrite downloads only what it hashes and uploads only what is new, plus the slack that the
  parts' minimum size forces; :func:`plan_parts` plans the parts (pure).
- :class:`StreamSink`: any other fsspec filesystem, streamed through the process in bounded
  memory and committed by the backend's own mechanism.

Both follow :class:`~parquet_bloom._io.sink.Sink`, as the local :class:`~parquet_bloom._io.sink.
FileSink` does. What each store makes atomic: docs/object-storage.md, rewriting objects.
"""

from __future__ import annotations

import datetime
import email.utils
import errno
import secrets
import tempfile
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import IO, Any, NamedTuple

from parquet_bloom._io.ranges import ByteRange
from parquet_bloom._io.sink import COPY_BUFFER_SIZE, check_cancel, write_all
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import BloomFilterError, CorruptFileError

__all__ = [
    "COPY_PART_SIZE",
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "PART_WORKERS",
    "SOURCE",
    "UPLOAD_PART_SIZE",
    "WRITE_TOKEN_KEY",
    "WRITTEN",
    "ObjectSink",
    "Part",
    "PendingUploadWarning",
    "Piece",
    "S3Sink",
    "StreamSink",
    "plan_parts",
]

# S3's multipart upload rules (docs/object-storage.md, rewriting objects): every part but the
# last holds at least 5 MiB, at most 5 GiB, and an upload has at most 10,000 parts; a part may be
# uploaded or copied by the store from a byte range of another object (UploadPartCopy); the
# object appears when CompleteMultipartUpload succeeds, and an aborted upload leaves nothing.
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
MAX_PARTS = 10_000
# Parts uploaded through the process: this long, each held in memory while it is sent. A part
# longer than the minimum costs nothing more (the slack that the minimum forces is the same).
UPLOAD_PART_SIZE = 16 * 1024 * 1024
# Ranges copied by the store, per part: a copy of this many bytes takes the store a few seconds,
# and parts are copied several at a time (PART_WORKERS).
COPY_PART_SIZE = 512 * 1024 * 1024
# Parts in flight at once (each thread holds at most one uploaded part in memory).
PART_WORKERS = 4
# What S3Sink learns of its own writes when a reply is lost (docs/object-storage.md, lost
# replies). Every PutObject and CreateMultipartUpload it sends carries this user metadata
# (x-amz-meta-parquet-bloom-write) with a random token of the sink's; HeadObject returns it,
# so that an object found after a lost reply is known to be this sink's.
WRITE_TOKEN_KEY = "parquet-bloom-write"
# The uploads that lost replies to CreateMultipartUpload started are found by the time S3 says
# they were initiated, against the store's own clock (the Date header of the listing, which has
# a resolution of one second; moto reports Initiated to the second too): this much either side.
CLOCK_ALLOWANCE = datetime.timedelta(seconds=2)
# Without a Date header, this machine's clock: S3 refuses a request signed more than 15 minutes
# off its own clock (RequestTimeTooSkewed), so the two differ by less than this.
SKEW_ALLOWANCE = datetime.timedelta(minutes=15)
# ListMultipartUploads pages read (1,000 uploads each) before giving up on finding them all.
MAX_UPLOAD_PAGES = 100
# Where a piece of the new object comes from.
WRITTEN = 0  # bytes written to the sink (kept in its spool until the object is sent)
SOURCE = 1  # bytes of the source, copied unchanged


class Piece(NamedTuple):
    """``length`` bytes at ``offset`` of ``origin`` (:data:`WRITTEN` or :data:`SOURCE`)."""

    origin: int
    offset: int
    length: int


class Part(NamedTuple):
    """One part of a multipart upload: pieces sent through the process, or (``server_copy``)
    one range of the source that the store copies itself."""

    pieces: tuple[Piece, ...]
    server_copy: bool

    @property
    def length(self) -> int:
        return sum(p.length for p in self.pieces)


def plan_parts(
    pieces: Sequence[Piece],
    *,
    server_copy: bool,
    min_part: int = MIN_PART_SIZE,
    upload_part: int = UPLOAD_PART_SIZE,
    copy_part: int = COPY_PART_SIZE,
) -> list[Part]:
    """The parts of an object made of ``pieces``, in order (pure).

    With ``server_copy``, every source range of at least ``min_part`` bytes is copied by the
    store, in parts of at most ``copy_part``; the bytes between such ranges are uploaded, and
    when they are fewer than ``min_part`` (a part's minimum, the last part excepted) they take
    their missing bytes from the start of the next copied range (all of it when what would be
    left is too short to be a part). Without it, everything is uploaded. Uploaded runs are cut
    into parts of ``upload_part`` to ``2 * upload_part`` bytes; the last part may be short.
    """
    if not (min_part <= upload_part and min_part <= copy_part <= MAX_PART_SIZE):
        raise ValueError("parts must be at least min_part and copies at most 5 GiB")
    parts: list[Part] = []
    run: list[Piece] = []  # bytes to upload, not yet in a part
    run_length = 0
    for piece in pieces:
        if piece.length <= 0:
            continue
        if not (server_copy and piece.origin == SOURCE and piece.length >= min_part):
            run.append(piece)
            run_length += piece.length
            continue
        if 0 < run_length < min_part:
            need = min_part - run_length
            if piece.length - need < min_part:
                run.append(piece)  # too short to leave a part behind: uploaded whole
                run_length += piece.length
                continue
            run.append(Piece(SOURCE, piece.offset, need))
            run_length += need
            piece = Piece(SOURCE, piece.offset + need, piece.length - need)
        parts.extend(_upload_parts(run, run_length, upload_part))
        run, run_length = [], 0
        # Equal shares, each at least min_part, at most copy_part when copy_part is at least
        # twice min_part (as it is, by far, at S3's sizes).
        count = max(1, min(-(-piece.length // copy_part), piece.length // min_part))
        for i in range(count):
            start = piece.length * i // count
            end = piece.length * (i + 1) // count
            parts.append(Part((Piece(SOURCE, piece.offset + start, end - start),), True))
    parts.extend(_upload_parts(run, run_length, upload_part))
    return parts


def _upload_parts(run: list[Piece], length: int, upload_part: int) -> list[Part]:
    """``run`` cut into parts of ``upload_part`` to ``2 * upload_part`` bytes (one part when
    shorter)."""
    if not length:
        return []
    count = max(1, length // upload_part)
    sizes = iter([length * (i + 1) // count - length * i // count for i in range(count)])
    parts: list[Part] = []
    current: list[Piece] = []
    left = next(sizes)  # bytes the current part still takes
    for piece in run:
        offset, remaining = piece.offset, piece.length
        while remaining:
            n = min(left, remaining)
            current.append(Piece(piece.origin, offset, n))
            offset += n
            remaining -= n
            left -= n
            if not left:
                parts.append(Part(tuple(current), False))
                current = []
                left = next(sizes, 0)
    return parts


class PendingUploadWarning(UserWarning):
    """A multipart upload of the S3 sink was left pending (it could not be aborted): it keeps
    its parts, and costs their storage, until aborted or removed by a lifecycle rule."""


# CreateMultipartUpload requests sent, by the token of the sink that sent them: botocore and
# s3fs retry a request whose reply was lost, and each attempt that reached the store started an
# upload. Counted by a botocore event handler on the filesystem's client (_count_create).
_CREATE_REQUESTS: dict[str, int] = {}
_CREATE_REQUESTS_LOCK = threading.Lock()
_TOKEN_HEADER = f"x-amz-meta-{WRITE_TOKEN_KEY}"


def _count_create(request: Any = None, **_: Any) -> None:
    """botocore's ``before-send.s3.CreateMultipartUpload``: one more request of the sink whose
    token the request carries (called once an attempt, retries included)."""
    headers = getattr(request, "headers", None) or {}
    token = headers.get(_TOKEN_HEADER)
    if isinstance(token, bytes):
        token = token.decode("ascii", "replace")
    with _CREATE_REQUESTS_LOCK:
        if token in _CREATE_REQUESTS:
            _CREATE_REQUESTS[token] += 1


class ObjectSink(ABC):
    """What :class:`S3Sink` and :class:`StreamSink` share: the counts, and ``copy``'s checks
    before the store's own way of appending a source's bytes (``_append``)."""

    target: str

    def __init__(self) -> None:
        self._count_lock = threading.Lock()
        self.requests = 0
        """Requests sent to the store by the sink (S3; 0 where the backend does not say)."""
        self.bytes_uploaded = 0
        """Bytes sent to the store."""
        self.bytes_copied = 0
        """Bytes the store copied from the source itself (S3 UploadPartCopy)."""

    def copy(
        self,
        source: ByteSource,
        start: int,
        end: int,
        *,
        cancel: threading.Event | None = None,
        direct: bool = False,
    ) -> None:
        """Append ``source[start:end]``. ``cancel`` set stops the copy (the sink must then be
        aborted); ``direct`` is for local files only."""
        check_cancel(cancel)
        self._append(source, start, end, cancel)

    @abstractmethod
    def _append(
        self, source: ByteSource, start: int, end: int, cancel: threading.Event | None
    ) -> None:
        """Append ``source[start:end]`` the store's way."""

    def sync(self) -> None:  # noqa: B027 (a sink that sends on completion has nothing to sync)
        """Nothing to do: the output is sent when the ``with`` block completes."""

    def writeback(self) -> None:  # noqa: B027 (the same)
        """Nothing to do: the output is sent when the ``with`` block completes."""

    @abstractmethod
    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``."""

    @abstractmethod
    def __enter__(self) -> ObjectSink:
        """Start the output."""

    @abstractmethod
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """Send the output when the block completed, else leave nothing."""

    def _count(self, *, requests: int = 0, uploaded: int = 0, copied: int = 0) -> None:
        with self._count_lock:
            self.requests += requests
            self.bytes_uploaded += uploaded
            self.bytes_copied += copied


class S3Sink(ObjectSink):
    """An S3 object that appears only when complete, made of bytes written and ranges of one
    source copied unchanged.

    Nothing is sent until the ``with`` block completes: ``write`` keeps its bytes in a spool
    (in memory, on disk past :data:`UPLOAD_PART_SIZE`) and ``copy`` notes the range. Then the
    object is sent in one PutObject when it fits in one uploaded part, else in a multipart
    upload (:func:`plan_parts`) that is completed only after every part succeeded and aborted
    on any failure, KeyboardInterrupt included, once no part is in flight. With
    ``copy_source`` (the source object on the same endpoint, ``{"Bucket": ..., "Key": ...}``;
    its ETag ``source_etag``), long unchanged ranges are copied by the store (UploadPartCopy,
    conditional on the ETag).
    ``if_match``: the ETag the object being replaced must still have (an in-place rewrite);
    if it changed, a located :class:`~parquet_bloom.errors.BloomFilterError` and nothing
    written. ``if_none_match``: the object must not exist (If-None-Match: ``*``), else
    FileExistsError and nothing written. Requests go through the filesystem's own client (s3fs
    ``call_s3``: its credentials, endpoint and retries); a failed request is an OSError naming
    the object's URL (``target``).

    Lost replies (docs/object-storage.md): what the sink writes carries a token of its own in
    user metadata (:data:`WRITE_TOKEN_KEY`), so that when the request that makes the object
    appear fails, a HeadObject that finds the object with that token and the expected size
    is success. The uploads that retried CreateMultipartUpload requests started are found by
    a listing and aborted, after success and failure alike; an upload that could not be
    aborted is in ``leftovers`` and reported (a note on the error raised, else a
    :class:`PendingUploadWarning`).
    """

    def __init__(
        self,
        filesystem: Any,
        path: str,
        *,
        copy_source: dict[str, str] | None = None,
        source_etag: str | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        upload_part: int = UPLOAD_PART_SIZE,
        copy_part: int = COPY_PART_SIZE,
        workers: int = PART_WORKERS,
    ) -> None:
        super().__init__()
        self._fs = filesystem
        self.target = str(filesystem.unstrip_protocol(path))
        self._bucket, self._key, _ = filesystem.split_path(path)
        self._copy_source = copy_source
        self._source_etag = source_etag
        self._if_match = if_match
        self._if_none_match = if_none_match
        self._upload_part = upload_part
        self._copy_part = copy_part
        self._workers = workers
        self._pieces: list[Piece] = []
        self._source: ByteSource | None = None
        self._spool: IO[bytes] | None = None
        self._spool_lock = threading.Lock()
        self._written = 0
        self._token = secrets.token_hex(16)
        self._create_began: float | None = None  # time.monotonic() around CreateMultipartUpload
        self._create_ended = 0.0
        self._create_wall = (0.0, 0.0)  # the same, time.time()
        self._creates_counted = False
        self.leftovers: list[str] = []
        """Multipart uploads of the target that the sink started and could not abort (or
        could not tell from another writer's): one description each."""

    def __enter__(self) -> S3Sink:
        self._spool = tempfile.SpooledTemporaryFile(max_size=self._upload_part)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self._send()
        finally:
            self._file().close()
            self._spool = None

    # -- output -------------------------------------------------------------------------------

    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``."""
        spool = self._file()
        n = len(memoryview(data).cast("B"))
        with self._spool_lock:
            spool.seek(self._written)
            write_all(spool, data)
        self._add(Piece(WRITTEN, self._written, n))
        self._written += n

    def _append(
        self, source: ByteSource, start: int, end: int, cancel: threading.Event | None
    ) -> None:
        """Note ``source[start:end]``, read or copied by the store when the object is sent;
        a source shorter than ``end`` raises ``CorruptFileError`` now."""
        self._file()
        if self._source is None:
            self._source = source
        elif source is not self._source:
            raise ValueError("an S3Sink copies from one source")
        if end > source.size:
            raise CorruptFileError(
                f"short read: the file ended {end - source.size} bytes early",
                source=source.name,
                offset=end,
            )
        self._add(Piece(SOURCE, start, end - start))

    def _add(self, piece: Piece) -> None:
        if piece.length <= 0:
            return
        last = self._pieces[-1] if self._pieces else None
        if (
            last is not None
            and last.origin == piece.origin
            and last.offset + last.length == (piece.offset)
        ):
            self._pieces[-1] = Piece(last.origin, last.offset, last.length + piece.length)
        else:
            self._pieces.append(piece)

    def _file(self) -> IO[bytes]:
        if self._spool is None:
            raise RuntimeError("the sink is used outside its with block")
        return self._spool

    # -- sending ------------------------------------------------------------------------------

    def _send(self) -> None:
        parts = plan_parts(
            self._pieces,
            server_copy=self._copy_source is not None,
            upload_part=self._upload_part,
            copy_part=self._copy_part,
        )
        if len(parts) > MAX_PARTS:
            raise OSError(f"{self.target}: {len(parts)} parts, more than S3's {MAX_PARTS}")
        condition = {} if self._if_match is None else {"IfMatch": self._if_match}
        if self._if_none_match:
            condition["IfNoneMatch"] = "*"
        metadata = {"Metadata": {WRITE_TOKEN_KEY: self._token}}
        if len(parts) <= 1 and not (parts and parts[0].server_copy):
            body = self._assemble(parts[0]) if parts else b""
            self._finish("put_object", len(body), Body=body, **metadata, **condition)
            self._count(uploaded=len(body))
            return
        upload_id: str | None = None
        try:
            upload_id = self._create(metadata)
            etags = self._send_parts(upload_id, parts)
            self._finish(
                "complete_multipart_upload",
                sum(part.length for part in parts),
                UploadId=upload_id,
                MultipartUpload={
                    "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]
                },
                **condition,
            )
        except BaseException as err:
            self._clean_up(upload_id, completed=False)
            note = getattr(err, "add_note", None)  # Python 3.11+
            if note is not None:
                for leftover in self.leftovers:
                    note(leftover)
            raise
        self._clean_up(upload_id, completed=True)
        for leftover in self.leftovers:
            warnings.warn(leftover, PendingUploadWarning, stacklevel=4)

    def _create(self, metadata: dict[str, Any]) -> str:
        """CreateMultipartUpload, its requests counted (retries included) and timed."""
        with _CREATE_REQUESTS_LOCK:
            _CREATE_REQUESTS[self._token] = 0
        self._creates_counted = self._count_creates()
        self._create_began, wall = time.monotonic(), time.time()
        try:
            return str(self._call("create_multipart_upload", **metadata)["UploadId"])
        finally:
            self._create_ended = time.monotonic()
            self._create_wall = (wall, time.time())

    def _count_creates(self) -> bool:
        """Have the filesystem's client count this sink's CreateMultipartUpload requests
        (:func:`_count_create`); whether it could."""
        try:
            events = self._fs.s3.meta.events
            events.register(
                "before-send.s3.CreateMultipartUpload",
                _count_create,
                unique_id="parquet-bloom-count-create",
            )
        except Exception:
            return False
        return True

    def _send_parts(self, upload_id: str, parts: list[Part]) -> list[str]:
        """Send every part, ``workers`` at a time; their ETags in order. On any failure the
        parts not started are cancelled and those in flight awaited before raising, so that
        the abort that follows leaves nothing behind."""
        pool = ThreadPoolExecutor(self._workers, thread_name_prefix="parquet-bloom-part")
        try:
            futures = [
                pool.submit(self._send_part, upload_id, n, part) for n, part in enumerate(parts, 1)
            ]
            return [future.result() for future in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _send_part(self, upload_id: str, number: int, part: Part) -> str:
        if part.server_copy:
            (piece,) = part.pieces
            condition = (
                {} if self._source_etag is None else {"CopySourceIfMatch": self._source_etag}
            )
            result = self._call(
                "upload_part_copy",
                UploadId=upload_id,
                PartNumber=number,
                CopySource=self._copy_source,
                CopySourceRange=f"bytes={piece.offset}-{piece.offset + piece.length - 1}",
                **condition,
            )
            self._count(copied=piece.length)
            return str(result["CopyPartResult"]["ETag"])
        body = self._assemble(part)
        result = self._call("upload_part", UploadId=upload_id, PartNumber=number, Body=body)
        self._count(uploaded=len(body))
        return str(result["ETag"])

    def _assemble(self, part: Part) -> bytes:
        """The bytes of an uploaded part: written ones from the spool, the source's read
        (coalesced, in one call)."""
        reads = [ByteRange(p.offset, p.length) for p in part.pieces if p.origin == SOURCE]
        if reads:
            assert self._source is not None
            datas = iter(self._source.read(reads))
        out = bytearray()
        for piece in part.pieces:
            if piece.origin == SOURCE:
                out += next(datas)
                continue
            with self._spool_lock:
                spool = self._file()
                spool.seek(piece.offset)
                out += spool.read(piece.length)
        return bytes(out)

    # -- the object appears ---------------------------------------------------------------------

    def _finish(self, method: str, size: int, **kwargs: Any) -> None:
        """The request that makes the object appear (PutObject, CompleteMultipartUpload). When
        it fails, its reply may have been lost after the store did it (and the client's retry
        refused: 412 with If-Match, NoSuchUpload once completed): a HeadObject that finds the
        object with this sink's token and ``size`` bytes is success; else the error stands."""
        try:
            self._conditional(method, **kwargs)
        except Exception as err:
            if not (_may_have_been_done(err) and self._landed(size, err)):
                raise

    def _landed(self, size: int, err: BaseException) -> bool:
        """Whether the object is there, written by this sink, ``size`` bytes long."""
        try:
            head = self._call("head_object")
        except Exception as head_error:
            if _error_code(head_error) not in ("404", "NoSuchKey", "NotFound"):
                note = getattr(err, "add_note", None)
                if note is not None:
                    note(f"the object could not be looked at afterwards: {head_error}")
            return False
        metadata = {str(k).lower(): v for k, v in (head.get("Metadata") or {}).items()}
        return bool(
            metadata.get(WRITE_TOKEN_KEY) == self._token and head.get("ContentLength") == size
        )

    def _conditional(self, method: str, **kwargs: Any) -> Any:
        """A call that makes the object appear: with ``IfMatch``, a changed object is refused
        by the store (412), which is reported as such; with ``IfNoneMatch``, an object that
        exists (412) or is being written by another conditional request (409) is a
        FileExistsError."""
        try:
            return self._call(method, **kwargs)
        except OSError as err:
            if self._if_none_match and (
                _precondition_failed(err)
                or _error_code(err) in ("ConditionalRequestConflict", "409")
            ):
                # 412: the object exists; 409: another conditional write of it is under way.
                raise FileExistsError(errno.EEXIST, "it exists already", self.target) from err
            if self._if_match is None or not _precondition_failed(err):
                raise
            raise BloomFilterError(
                f"the object changed since it was read (its ETag is no longer "
                f"{self._if_match}): not overwritten",
                source=self.target,
            ) from err

    # -- what is left behind --------------------------------------------------------------------

    def _clean_up(self, upload_id: str | None, *, completed: bool) -> None:
        """Abort the upload ``upload_id`` unless ``completed``, and the uploads that this
        sink's CreateMultipartUpload requests started and whose replies were lost; what could
        not be aborted goes to ``leftovers``. Never raises but KeyboardInterrupt and the
        like."""
        try:
            with _CREATE_REQUESTS_LOCK:
                requests = _CREATE_REQUESTS.pop(self._token, 0)
            failed: dict[str, BaseException] = {}
            if upload_id is not None and not completed:
                error = self._abort(upload_id)
                if error is not None:
                    failed[upload_id] = error
            if self._create_began is None:
                pass  # no upload was started
            elif upload_id is not None and requests == 1 and self._creates_counted and not failed:
                pass  # one request, its upload known: nothing else was started
            elif upload_id is None and requests == 0 and self._creates_counted:
                pass  # the create was not sent at all
            else:
                failed = self._abort_orphans(upload_id, requests, failed)
            self.leftovers.extend(
                f"the multipart upload {u} of {self.target} could not be aborted ({e}): it "
                "stays pending (and its parts billed) until aborted or removed by a lifecycle "
                "rule for incomplete multipart uploads"
                for u, e in failed.items()
            )
        except Exception as err:  # a bug here must not hide the rewrite's own outcome
            self.leftovers.append(f"the uploads of {self.target} could not be cleaned up: {err}")

    def _abort_orphans(
        self, upload_id: str | None, requests: int, failed: dict[str, BaseException]
    ) -> dict[str, BaseException]:
        """List the target's uploads; abort those this sink started and does not know of;
        the uploads still pending that could not be aborted, with their errors."""
        try:
            uploads, window = self._list_uploads()
        except Exception as err:
            self.leftovers.append(
                f"the multipart uploads of {self.target} could not be listed ({err}): those "
                "that requests whose replies were lost may have started were not aborted"
            )
            return failed
        listed = {u["UploadId"] for u in uploads}
        failed = {u: e for u, e in failed.items() if u in listed}  # gone: aborted after all
        began, ended = window
        ours = [
            u["UploadId"]
            for u in uploads
            if u["UploadId"] != upload_id
            and isinstance(u.get("Initiated"), datetime.datetime)
            and began <= u["Initiated"] <= ended
        ]
        # At most one upload a request: more means another writer started one meanwhile.
        could = requests - (upload_id is not None) if self._creates_counted else len(ours)
        if len(ours) > could:
            self.leftovers.append(
                f"{len(ours)} multipart uploads of {self.target} were started while this "
                f"sink's {requests} CreateMultipartUpload requests ran, more than they could "
                f"have started: another writer's are among them, so none was aborted "
                f"({', '.join(ours)})"
            )
            return failed
        errors = {u: e for u in ours if (e := self._abort(u)) is not None}
        if errors:
            try:
                uploads, _ = self._list_uploads()
                errors = {
                    u: e for u, e in errors.items() if any(x["UploadId"] == u for x in uploads)
                }
            except Exception:
                pass  # reported as not aborted, which they may not be
        return {**failed, **errors}

    def _abort(self, upload_id: str) -> BaseException | None:
        """AbortMultipartUpload; None when the upload is gone (a retry after a lost reply
        finds it aborted: NoSuchUpload), else the error."""
        try:
            self._call("abort_multipart_upload", UploadId=upload_id)
        except Exception as err:
            return None if _error_code(err) == "NoSuchUpload" else err
        return None

    def _list_uploads(
        self,
    ) -> tuple[list[dict[str, Any]], tuple[datetime.datetime, datetime.datetime]]:
        """The target's pending multipart uploads (ListMultipartUploads with the key as
        prefix, exact key kept), and the time the create call ran, in the store's clock."""
        uploads: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"Prefix": self._key}
        for _ in range(MAX_UPLOAD_PAGES):
            page = self._request("list_multipart_uploads", **kwargs)
            received = time.monotonic()
            rows = page.get("Uploads") or []
            uploads += [u for u in rows if u.get("Key") == self._key]
            # Sorted by key: past ours, nothing more of ours.
            if not page.get("IsTruncated") or any(u.get("Key", "") > self._key for u in rows):
                break
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["UploadIdMarker"] = page.get("NextUploadIdMarker")
        else:
            raise OSError(f"more than {MAX_UPLOAD_PAGES} pages of multipart uploads")
        assert self._create_began is not None
        date = (page.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
        try:
            now = email.utils.parsedate_to_datetime(date)
        except (TypeError, ValueError):
            now = None
        if now is None or now.tzinfo is None:
            began, ended = (
                datetime.datetime.fromtimestamp(t, datetime.timezone.utc) for t in self._create_wall
            )
            return uploads, (began - SKEW_ALLOWANCE, ended + SKEW_ALLOWANCE)
        began = now - datetime.timedelta(seconds=received - self._create_began)
        ended = now - datetime.timedelta(seconds=received - self._create_ended)
        return uploads, (began - CLOCK_ALLOWANCE, ended + CLOCK_ALLOWANCE)

    # -- requests -------------------------------------------------------------------------------

    def _call(self, method: str, **kwargs: Any) -> Any:
        """A request about the target object."""
        return self._request(method, Key=self._key, **kwargs)

    def _request(self, method: str, **kwargs: Any) -> Any:
        """A request to the target's bucket, through the filesystem's client (its retries); a
        failure is an OSError naming the target."""
        self._count(requests=1)
        try:
            return self._fs.call_s3(method, Bucket=self._bucket, **kwargs)
        except BloomFilterError:
            raise
        except Exception as err:
            raise _located(err, f"{method} on {self.target} failed") from err


def _located(err: Exception, where: str) -> OSError:
    """``err`` (s3fs's OSError, or botocore's own error for a connection that failed) as an
    OSError of the same class whose message says ``where``."""
    message = f"{where}: {err}"
    if isinstance(err, OSError):
        with suppress(Exception):
            return type(err)(message)
    return OSError(message)


def _error_response(err: BaseException) -> tuple[str | None, int | None]:
    """S3's error code and HTTP status behind an error (None, None: no answer was received):
    botocore's ClientError is the cause of s3fs's OSError, which is the cause of the sink's."""
    seen: BaseException | None = err
    for _ in range(4):
        if seen is None:
            break
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return (str(code) if code else None), (int(status) if status else None)
        seen = seen.__cause__
    return None, None


def _error_code(err: BaseException) -> str | None:
    """S3's error code behind an error, else its HTTP status (as a string)."""
    code, status = _error_response(err)
    return code if code is not None else (None if status is None else str(status))


def _may_have_been_done(err: BaseException) -> bool:
    """Whether a write that failed with ``err`` may have been done by the store all the same:
    no answer received (the reply lost), a server error, or the refusal of a retry of a write
    that was done (412 under If-Match: the ETag is now the new object's; NoSuchUpload: the
    upload was completed). Other refusals (403, 400...) say that nothing was written."""
    code, status = _error_response(err)
    if code is None and status is None:
        return True
    return (
        code in ("PreconditionFailed", "NoSuchUpload")
        or status in (412, 404)
        or (status is not None and status >= 500)
    )


def _precondition_failed(err: BaseException) -> bool:
    """Whether an error from s3fs is S3's 412 Precondition Failed."""
    return _error_code(err) in ("PreconditionFailed", "412")


class StreamSink(ObjectSink):
    """An object on any other fsspec filesystem, streamed through the process in bounded
    memory and committed by the backend's own mechanism only when complete.

    The file is opened with ``autocommit=False`` where the backend's file object honours it
    (fsspec's buffered files: gcsfs, adlfs, s3fs; the upload is finalised by ``commit()`` and
    thrown away by ``discard()``); the memory filesystem's file is stored by ``commit()``.
    Any other backend writes a temporary object next to the target and moves it over the
    target when complete (``fs.mv``), removing it on failure. See docs/object-storage.md for
    what each backend makes atomic.
    """

    def __init__(self, filesystem: Any, path: str) -> None:
        super().__init__()
        self._fs = filesystem
        self._path = path
        self.target = str(filesystem.unstrip_protocol(path))
        self._out: Any | None = None
        self._temporary: str | None = None

    def __enter__(self) -> StreamSink:
        protocols = self._fs.protocol
        protocols = (protocols,) if isinstance(protocols, str) else tuple(protocols)
        if "memory" in protocols:
            from fsspec.implementations.memory import MemoryFile

            self._out = MemoryFile(self._fs, self._fs._strip_protocol(self._path))
            return self
        out = self._fs.open(self._path, "wb", autocommit=False)
        if getattr(out, "autocommit", True) is False and hasattr(out, "discard"):
            self._out = out
            return self
        out.close()  # a backend that ignored autocommit=False: never written to
        parent, _, name = self._path.rpartition("/")
        self._temporary = f"{parent}/.{name}.{secrets.token_hex(6)}.tmp"
        self._out = self._fs.open(self._temporary, "wb")
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        out = self._stream()
        self._out = None
        if exc_type is None:
            self._commit(out)
            return
        with suppress(Exception):
            if self._temporary is not None:
                out.close()
                self._fs.rm(self._temporary)
            elif hasattr(out, "discard"):
                out.discard()

    def _commit(self, out: Any) -> None:
        if self._temporary is None and hasattr(out, "discard"):
            try:
                out.close()  # the last block sent, not finalised (autocommit=False)
                out.commit()
            except BaseException:
                with suppress(Exception):
                    out.discard()
                raise
            return
        try:
            out.close()
            self._fs.mv(self._temporary, self._path)
        except BaseException:
            with suppress(Exception):
                self._fs.rm(self._temporary)
            raise

    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``."""
        out = self._stream()
        out.write(data)
        self._count(uploaded=len(memoryview(data).cast("B")))

    def _append(
        self, source: ByteSource, start: int, end: int, cancel: threading.Event | None
    ) -> None:
        """Read ``source[start:end]`` a block at a time into the stream."""
        position = start
        while position < end:
            check_cancel(cancel)
            length = min(COPY_BUFFER_SIZE, end - position)
            self.write(source.read_exact(position, length))
            position += length

    def _stream(self) -> Any:
        if self._out is None:
            raise RuntimeError("the sink is used outside its with block")
        return self._out
