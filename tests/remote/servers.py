"""The servers the object-store tests and benchmarks run against, all on 127.0.0.1.

- ``start_s3_server``: moto in server mode (the S3 protocol, as s3fs's own tests run it), its
  Flask app served by werkzeug on a free port, wrapped in ``S3Faults``: a WSGI middleware that
  can fail the N-th request matching a predicate (``FAULT_MODES``: an S3 error status, a
  dropped connection, a reply lost after the request was handled, a body cut short or reset,
  a stall) and delay every request (object-store latency, for benchmarks). Requests are counted by
  moto's own recorder (``/moto-api/recorder/...``), read back as ``RecordedRequest`` rows.
- ``start_http_server``: a stdlib ``ThreadingHTTPServer`` serving a directory with single
  byte-range support (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``: 206 and Content-Range; 416 when
  unsatisfiable), HEAD with Content-Length and Accept-Ranges, a request log and the same
  ``Faults`` rules as the S3 server (``server.faults``). Two misbehaving server modes:
  ``"short"`` sends fewer body bytes than its Content-Length announces and closes; ``"stall"``
  reads the request, sends nothing for ``stall`` seconds, then closes.

Every server runs on daemon threads and stops in bounded time (``stop()``, or ``with``).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

HOST = "127.0.0.1"
# Credentials moto accepts; nothing here is a real account.
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]

# The S3 error code a status is answered with, so that botocore parses the error as S3's own.
_ERROR_CODES = {
    400: "BadRequest",
    403: "AccessDenied",
    404: "NoSuchKey",
    409: "OperationAborted",
    412: "PreconditionFailed",
    500: "InternalError",
    503: "SlowDown",
}


# --- the S3 server ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request the S3 server served, as moto's recorder wrote it down."""

    method: str
    bucket: str  # "" for a request on the service (ListBuckets)
    key: str  # "" for a request on a bucket
    query: dict[str, str]  # e.g. {"uploads": ""}, {"partNumber": "2", "uploadId": "..."}
    range: str | None  # the Range header, e.g. "bytes=0-99"
    headers: dict[str, str] = field(repr=False)

    @property
    def path(self) -> str:
        """``bucket/key`` (or ``bucket`` alone), without a leading slash."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> RecordedRequest:
        url = urlsplit(entry["url"])
        bucket, _, key = unquote(url.path).lstrip("/").partition("/")
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        headers = {str(k): str(v) for k, v in entry["headers"].items()}
        ranges = [v for k, v in headers.items() if k.lower() == "range"]
        return cls(
            method=entry["method"],
            bucket=bucket,
            key=key,
            query=query,
            range=ranges[0] if ranges else None,
            headers=headers,
        )


# What a fault does to the request it fires on.
# - "status": answered with an error status (an S3 error document on the S3 server); the
#   server behind never sees the request.
# - "drop": the connection closed without an answer; the server behind never sees it.
# - "lose_reply": the server behind handles the request (an object is written, an upload
#   started), then the connection is closed before its answer: the client sees a reset.
# - "short": the answer's headers (with their Content-Length) and half its body, then the
#   connection closes.
# - "reset": the same, the connection then closed with a reset (SO_LINGER 0).
# - "stall": nothing is sent until ``stall`` seconds pass or the faults are cleared (the end of
#   the test) or the server stops; then the connection closes. The server behind never sees it.
FAULT_MODES = ("status", "drop", "lose_reply", "short", "reset", "stall")


@dataclass
class FaultRule:
    """Fail the ``nth`` request matching (method, query and path substrings) and the
    ``times - 1`` matching requests after it (``times=None``: every one from the ``nth`` on),
    in ``mode`` (``FAULT_MODES``)."""

    method: str | None
    query_contains: str | None
    path_contains: str | None
    nth: int
    times: int | None
    status: int
    mode: str = "status"
    seen: int = 0

    def matches(self, method: str, path: str, query: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.query_contains is None or self.query_contains in query)
            and (self.path_contains is None or self.path_contains in path)
        )

    def fires(self) -> bool:
        """Count one matching request; whether it is one to fail."""
        self.seen += 1
        if self.seen < self.nth:
            return False
        return self.times is None or self.seen < self.nth + self.times


@dataclass(frozen=True)
class InjectedFault:
    """A request a fault fired on: ``mode`` says what was done (see ``FAULT_MODES``); with
    "status" and "drop" and "stall" the server behind never saw it (moto's recorder has no row
    for it), with the other modes it did."""

    method: str
    path: str
    query: str
    status: int | None  # None: no status was sent
    mode: str = "status"


class Faults:
    """The rules of a faulty server, thread-safe: ``fail(...)``, ``clear()``, ``injected``,
    ``delay`` (seconds added before every request), and ``released`` (set by ``clear()`` and at
    the server's stop: a stalled request ends then)."""

    def __init__(self, stall: float = 20.0) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self.delay = 0.0
        self.stall = stall
        self.released = threading.Event()
        self.injected: list[InjectedFault] = []

    def fail(
        self,
        method: str | None,
        query_contains: str | None = None,
        nth: int = 1,
        status: int = 500,
        *,
        path_contains: str | None = None,
        times: int | None = 1,
        drop: bool = False,
        mode: str | None = None,
    ) -> None:
        """Fail the ``nth`` request whose method is ``method`` (None: any) and whose raw query
        string contains ``query_contains`` (e.g. ``"partNumber="``, ``"uploads"``) and path
        ``path_contains``; with ``times`` > 1 the next matching ones too, with ``times=None``
        every one from then on (so that a client's retries fail as well). ``mode``: one of
        ``FAULT_MODES`` (default "status": an error answer with ``status``, 500 InternalError,
        503 SlowDown, 404 NoSuchKey, ...; ``drop=True`` is ``mode="drop"``)."""
        if nth < 1 or (times is not None and times < 1):
            raise ValueError(f"nth and times count from 1, got nth={nth}, times={times}")
        mode = mode or ("drop" if drop else "status")
        if mode not in FAULT_MODES:
            raise ValueError(f"mode is one of {FAULT_MODES}, not {mode!r}")
        rule = FaultRule(method, query_contains, path_contains, nth, times, status, mode)
        with self._lock:
            self.released.clear()
            self._rules.append(rule)

    def clear(self) -> None:
        """Forget every rule and injected fault, and the delay; end every stalled request."""
        with self._lock:
            self._rules.clear()
            self.injected.clear()
            self.delay = 0.0
            self.released.set()

    def fault_for(self, method: str, path: str, query: str) -> FaultRule | None:
        """The rule that fires on this request, if one does (and it is then recorded)."""
        with self._lock:
            fired = [rule for rule in self._rules if rule.matches(method, path, query)]
            fired = [rule for rule in fired if rule.fires()]
            if not fired:
                return None
            rule = fired[0]
            status = rule.status if rule.mode == "status" else None
            self.injected.append(InjectedFault(method, path, query, status, rule.mode))
            return rule

    def wait_stalled(self) -> None:
        """Hold a stalled request: until ``stall`` seconds pass or the faults are released."""
        self.released.wait(self.stall)


def close_abruptly(sock: socket.socket, *, reset: bool) -> None:
    """End a connection from the server's side at once: a FIN, and with ``reset`` a reset when
    the socket is closed (SO_LINGER with a zero timeout). The owner closes the socket itself."""
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the client went first


class S3Faults(Faults):
    """WSGI middleware around moto's app: a delay before every request, and faults
    (``Faults.fail``, every mode of ``FAULT_MODES``).

    Requests to ``/moto-api/`` (the recorder, the reset) are never delayed or failed. Requests
    with a body are passed to moto one at a time: moto's recorder appends each request to its
    file in more than one write once it is larger than a buffer, and concurrent uploads would
    interleave their lines.
    """

    def __init__(self, app: WSGIApp) -> None:
        super().__init__()
        self._app = app
        self._body_lock = threading.Lock()

    def _pass(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        if _has_body(environ):
            with self._body_lock:
                # Consumed inside the lock: moto's response may stream from moto's state.
                return list(self._app(environ, start_response))
        return self._app(environ, start_response)

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/moto-api/"):
            return self._app(environ, start_response)
        if self.delay > 0:
            time.sleep(self.delay)
        method = environ["REQUEST_METHOD"]
        rule = self.fault_for(method, path, environ.get("QUERY_STRING", ""))
        if rule is None:
            return self._pass(environ, start_response)
        sock = environ["werkzeug.socket"]
        if rule.mode in ("drop", "stall"):
            _drain(environ)  # the client finishes sending before it sees the failure
            if rule.mode == "stall":
                self.wait_stalled()
            close_abruptly(sock, reset=False)
            # werkzeug takes a ConnectionError as the connection dropped, quietly.
            raise ConnectionResetError(f"connection {rule.mode} by S3Faults")
        if rule.mode == "status":
            _drain(environ)
            code = _ERROR_CODES.get(rule.status, "InternalError")
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
                f"{code}</Code><Message>injected by the test's S3Faults</Message>"
                "<RequestId>injected</RequestId></Error>"
            ).encode()
            reason = HTTPStatus(rule.status).phrase
            start_response(
                f"{rule.status} {reason}",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
            )
            return [body]
        answer: list[Any] = []
        with self._body_lock:
            body = b"".join(self._app(environ, lambda *args: answer.append(args)))
        if rule.mode == "lose_reply":
            close_abruptly(sock, reset=True)
            raise ConnectionResetError("reply lost by S3Faults")
        status, headers = answer[0][0], answer[0][1]
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return _cut_short(body, sock, reset=rule.mode == "reset")


def _cut_short(body: bytes, sock: socket.socket, *, reset: bool) -> Iterator[bytes]:
    """Half of ``body``, then the connection ended (a FIN, or a reset)."""
    yield body[: len(body) // 2]
    close_abruptly(sock, reset=reset)
    raise ConnectionResetError("answer cut short by the test's faults")


def _has_body(environ: WSGIEnviron) -> bool:
    length = environ.get("CONTENT_LENGTH") or "0"
    return int(length) > 0 or bool(environ.get("HTTP_TRANSFER_ENCODING"))


def _drain(environ: WSGIEnviron) -> None:
    stream = environ["wsgi.input"]
    if environ.get("wsgi.input_terminated"):
        while stream.read(1 << 16):
            pass
        return
    remaining = int(environ.get("CONTENT_LENGTH") or "0")
    while remaining > 0:
        chunk = stream.read(min(remaining, 1 << 16))
        if not chunk:
            break
        remaining -= len(chunk)


class Meter:
    """WSGI middleware that counts the requests and response-body bytes an app served and
    paces every response body at ``bandwidth`` bytes a second (None: unpaced), each request on
    its own (a store's per-connection throughput: concurrent requests do not share it).

    Requests to ``/moto-api/`` and ``/meter-api/`` are neither counted nor paced;
    ``GET /meter-api/counters`` answers ``{"requests": n, "bytes": b}`` and
    ``POST /meter-api/reset`` zeroes both, so that a process other than the server's reads them.
    """

    CHUNK = 64 << 10  # bytes written between two pauses

    def __init__(self, app: WSGIApp, bandwidth: float | None = None) -> None:
        if bandwidth is not None and bandwidth <= 0:
            raise ValueError(f"bandwidth is a positive number of bytes a second, got {bandwidth}")
        self._app = app
        self.bandwidth = bandwidth
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def reset(self) -> None:
        with self._lock:
            self.requests = 0
            self.bytes = 0

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self.requests, "bytes": self.bytes}

    def _sent(self, n: int) -> None:
        with self._lock:
            self.bytes += n

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/meter-api/"):
            if path == "/meter-api/reset" and environ["REQUEST_METHOD"] == "POST":
                self.reset()
            body = json.dumps(self.counters()).encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        if path.startswith("/moto-api/"):
            return self._app(environ, start_response)
        with self._lock:
            self.requests += 1
        return self._paced(self._app(environ, start_response))

    def _paced(self, body: Iterable[bytes]) -> Iterator[bytes]:
        start = time.monotonic()
        sent = 0
        try:
            for data in body:
                for i in range(0, len(data), self.CHUNK):
                    piece = data[i : i + self.CHUNK]
                    yield piece
                    sent += len(piece)
                    self._sent(len(piece))
                    if self.bandwidth is not None:
                        # Paced against the clock: a piece's write time counts towards its own.
                        wait = start + sent / self.bandwidth - time.monotonic()
                        if wait > 0:
                            time.sleep(wait)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()


# moto's recorder appends to a file whose location it reads once, when moto.moto_api is first
# imported: one file per test process, outside the working tree, removed at exit.
RECORDING = Path(tempfile.gettempdir()) / f"parquet-bloom-moto-recording-{os.getpid()}.jsonl"
atexit.register(RECORDING.unlink, missing_ok=True)


def _import_moto() -> tuple[Any, Any, Any]:
    """moto's server pieces, its recorder writing to ``RECORDING``."""
    if "moto.moto_api" not in sys.modules:
        os.environ["MOTO_RECORDER_FILEPATH"] = str(RECORDING)
    elif os.environ.get("MOTO_RECORDER_FILEPATH") != str(RECORDING):
        raise RuntimeError(
            "moto was imported before start_s3_server set MOTO_RECORDER_FILEPATH: its recorder "
            "would write into the working directory. Start the server before importing moto."
        )
    importlib.import_module("moto.moto_api")
    from moto.moto_server import werkzeug_app
    from werkzeug.serving import WSGIRequestHandler

    # moto 5.1.x's handler keeps the underscores of S3 metadata headers; before it, werkzeug's.
    handler = getattr(werkzeug_app, "MotoRequestHandler", WSGIRequestHandler)
    return werkzeug_app.DomainDispatcherApplication, handler, werkzeug_app.create_backend_app


class _Running:
    """A server serving on a daemon thread until ``stop()`` (or the end of a ``with``)."""

    _serving: socketserver.BaseServer
    _thread: threading.Thread

    def _run(self, serving: socketserver.BaseServer, name: str) -> None:
        self._serving = serving
        self._thread = threading.Thread(target=serving.serve_forever, name=name, daemon=True)
        self._thread.start()

    def _halt(self) -> None:
        self._serving.shutdown()
        self._serving.server_close()
        self._thread.join(timeout=30)

    def stop(self) -> None:
        self._halt()

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_R = TypeVar("_R", bound=_Running)


def json_objects(text: str) -> list[Any]:
    """The JSON objects of moto's recording, one after another.

    moto appends each entry with two writes (the JSON, then a newline) from the server's
    request threads, without a lock. An entry larger than the write buffer goes out at once
    and its newline later, so a concurrent request's entry can land between them: the file
    then holds two whole objects on one line. Each write is one ``O_APPEND`` write, so objects
    are never cut; only the newlines are unreliable, and whitespace is all this skips.
    """
    decoder = json.JSONDecoder()
    rows, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return rows
        row, at = decoder.raw_decode(text, at)
        rows.append(row)


class _MotoApi:
    """moto's ``/moto-api/`` endpoints (the recorder, the reset) on ``endpoint_url``, over
    HTTP: the same whether moto serves in this process or in a child."""

    endpoint_url: str
    recording: bool

    # the recorder: moto's /moto-api/recorder/ endpoints
    def _recorder(self, action: str) -> bytes:
        method = "GET" if action == "download-recording" else "POST"
        url = f"{self.endpoint_url}/moto-api/recorder/{action}"
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
            data: bytes = r.read()
            return data

    def start_recording(self) -> None:
        self._recorder("start-recording")
        self.recording = True

    def stop_recording(self) -> None:
        self._recorder("stop-recording")
        self.recording = False

    def reset_recording(self) -> None:
        self._recorder("reset-recording")

    def recorded(self) -> list[RecordedRequest]:
        """The requests recorded since the last reset, in order, without ``/moto-api/`` ones."""
        rows = json_objects(self._recorder("download-recording").decode())
        requests = [RecordedRequest.from_entry(row) for row in rows if row]
        return [r for r in requests if r.bucket != "moto-api"]

    def paused_recording(self) -> _Paused:
        """A context in which requests (a fixture's set-up) are not recorded."""
        return _Paused(self)

    def reset(self) -> None:
        """Empty every bucket moto holds (moto's reset), faults and recording included."""
        with urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST"),
            timeout=30,
        ):
            pass


class S3Server(_Running, _MotoApi):
    """A running moto server: ``endpoint_url``, ``faults``, the recorder, ``stop()``."""

    def __init__(
        self, delay: float = 0.0, *, meter: bool = False, bandwidth: float | None = None
    ) -> None:
        dispatcher, handler, create_backend_app = _import_moto()
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(handler):  # type: ignore[misc, valid-type]
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                pass

        assert issubclass(QuietHandler, WSGIRequestHandler)
        _upload_initiation_times()
        self.faults = S3Faults(dispatcher(create_backend_app))
        self.faults.delay = delay
        # With meter=True (or a bandwidth): requests and bytes counted, bodies paced.
        self.meter = Meter(self.faults, bandwidth) if meter or bandwidth is not None else None
        self._server = make_server(
            HOST, 0, self.meter or self.faults, threaded=True, request_handler=QuietHandler
        )
        self.port: int = self._server.server_port
        self.endpoint_url = f"http://{HOST}:{self.port}"
        self.recording = False
        self._run(self._server, "moto-s3")

    def stop(self) -> None:
        self.faults.released.set()  # a stalled request ends now
        if self.recording:
            self.stop_recording()
        self._halt()


class _Paused:
    def __init__(self, server: _MotoApi) -> None:
        self._server = server
        self._was = False

    def __enter__(self) -> None:
        self._was = self._server.recording
        if self._was:
            self._server.stop_recording()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            self._server.start_recording()


def start_s3_server(delay: float = 0.0) -> S3Server:
    """Start moto's S3 server on 127.0.0.1 (a free port), every request delayed by ``delay``
    seconds (a benchmark's object-store latency). Stop it with ``stop()`` or ``with``.
    Credentials: ``ACCESS_KEY``/``SECRET_KEY`` in ``REGION``; ``s3_storage_options`` gives
    them to s3fs."""
    return S3Server(delay)


class S3ServerProcess(_MotoApi):
    """moto's S3 server in a child process (``python -m tests.remote.servers``), so that its
    request handling (milliseconds of Python a request) does not compete for this process's
    GIL: ``endpoint_url``, ``port``, the recorder (over HTTP), ``counters()`` and
    ``reset_counters()`` (its ``Meter``), ``stop()``. Its ``faults`` live in the child: None
    here. The child serves on 127.0.0.1 until stopped, its stdin closed, or ``max_seconds``;
    a ranged GET there costs its range, not the object's size (``_ranges_from_memory``)."""

    faults = None

    def __init__(
        self,
        delay: float = 0.0,
        bandwidth: float | None = None,
        max_seconds: float = 1800.0,
        start_timeout: float = 60.0,
    ) -> None:
        import subprocess

        command = [sys.executable, "-m", "tests.remote.servers", "--delay", str(delay)]
        command += ["--max-seconds", str(max_seconds)]
        if bandwidth is not None:
            command += ["--bandwidth", str(bandwidth)]
        self._process = subprocess.Popen(
            command,
            cwd=Path(__file__).resolve().parents[2],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        started: list[bytes] = []
        reader = threading.Thread(
            target=lambda: started.append(self._process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(start_timeout)
        if not started or not started[0]:
            self._end()
            raise RuntimeError(f"the S3 server process did not start in {start_timeout} s")
        self.port: int = json.loads(started[0])["port"]
        self.endpoint_url = f"http://{HOST}:{self.port}"
        self.recording = False

    def _meter(self, action: str) -> dict[str, int]:
        method = "POST" if action == "reset" else "GET"
        url = f"{self.endpoint_url}/meter-api/{action}"
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
            counters: dict[str, int] = json.loads(r.read())
            return counters

    def counters(self) -> dict[str, int]:
        """``{"requests": n, "bytes": b}``: requests served and response-body bytes sent since
        the last ``reset_counters()`` (``/moto-api/`` and ``/meter-api/`` ones left out)."""
        return self._meter("counters")

    def reset_counters(self) -> None:
        self._meter("reset")

    def cpu_seconds(self) -> float:
        """The CPU time (user + system) the server process has used so far (Linux's /proc)."""
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _end(self) -> None:
        import subprocess

        if self._process.stdin is not None:
            self._process.stdin.close()  # the child stops when its stdin closes
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=30)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def stop(self) -> None:
        self._end()

    def __enter__(self) -> S3ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _upload_initiation_times() -> None:
    """Make moto's ListMultipartUploads report when each upload was started. moto 5.2 answers
    every upload with the same ``Initiated`` (2010-11-10T20:48:33Z), which no store does; the
    S3 sink finds the uploads its lost replies started by that time (docs/object-storage.md).
    Here each upload notes the time it was created (UTC, milliseconds, as S3 reports it) and
    the listing reports it. Applied once; moto's other answers are unchanged."""
    import datetime

    from moto.s3.models import FakeMultipart
    from moto.s3.responses import S3Response

    if getattr(FakeMultipart, "_initiation_times", False):
        return
    create = FakeMultipart.__init__
    listing = S3Response.list_multipart_uploads

    def created(upload: Any, *args: Any, **kwargs: Any) -> None:
        create(upload, *args, **kwargs)
        now = datetime.datetime.now(datetime.timezone.utc)
        upload.initiated = now.replace(microsecond=now.microsecond // 1000 * 1000)

    def listed(response: Any) -> Any:
        uploads = response.backend.list_multipart_uploads(response.bucket_name)
        serialize = response.serialized

        def with_times(action_result: Any) -> Any:
            for row in getattr(action_result, "result", {}).get("Uploads", []):
                upload = uploads.get(row.get("UploadId"))
                if upload is not None and hasattr(upload, "initiated"):
                    row["Initiated"] = upload.initiated
            return serialize(action_result)

        response.serialized = with_times
        try:
            return listing(response)
        finally:
            del response.serialized

    FakeMultipart.__init__ = created  # type: ignore[method-assign]
    S3Response.list_multipart_uploads = listed  # type: ignore[method-assign]
    FakeMultipart._initiation_times = True  # type: ignore[attr-defined]


def _ranges_from_memory() -> None:
    """Make moto read an object's bytes once, not once a request. moto answers a ranged GET by
    reading the whole object from its buffer (a temporary file past 5 MiB) and slicing it:
    18 ms of server CPU for any range of a 32 MiB object, a cost no store has, that would
    charge each request for the object's size. Here the bytes read are kept with the object
    (in memory) and each GET slices them; writing the object drops them, and bytes read while
    it was being written are not kept."""
    from moto.s3.models import FakeKey

    stored: property = FakeKey.value
    lock = threading.Lock()

    def value(key: Any) -> bytes:
        with lock:
            whole: bytes | None = key.__dict__.get("_whole")
            written = key.__dict__.get("_written", 0)
        if whole is None:
            whole = stored.__get__(key)  # outside the lock: other objects' GETs go on
            with lock:
                if key.__dict__.get("_written", 0) == written:
                    key.__dict__["_whole"] = whole
        return whole

    def set_value(key: Any, new: bytes) -> None:
        with lock:
            key.__dict__.pop("_whole", None)
            key.__dict__["_written"] = key.__dict__.get("_written", 0) + 1
            stored.__set__(key, new)

    FakeKey.value = property(value, set_value)  # type: ignore[method-assign, assignment]


def _serve(argv: list[str] | None = None) -> int:
    """The child of ``S3ServerProcess``: serve until stdin closes or ``--max-seconds``."""
    import argparse

    parser = argparse.ArgumentParser(description="moto's S3 server on 127.0.0.1, metered")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to a request")
    parser.add_argument("--bandwidth", type=float, default=None, help="body bytes a second")
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    args = parser.parse_args(argv)
    server = S3Server(args.delay, meter=True, bandwidth=args.bandwidth)
    _ranges_from_memory()
    print(json.dumps({"port": server.port}), flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait(args.max_seconds)
    server.stop()
    return 0


def s3_storage_options(endpoint_url: str) -> dict[str, Any]:
    """fsspec/s3fs options for the server: its endpoint, the test credentials and region (so
    that botocore never looks for real ones, nor at instance metadata), and a filesystem
    instance of its own for each call (no listing cached from another test)."""
    return {
        "endpoint_url": endpoint_url,
        "key": ACCESS_KEY,
        "secret": SECRET_KEY,
        "client_kwargs": {"region_name": REGION},
        "skip_instance_cache": True,
    }


class S3Requests:
    """The requests the S3 server recorded since the last ``reset()``: ``list()``,
    ``count(method=None)``. Recording runs from construction until ``stop()``."""

    def __init__(self, server: S3Server) -> None:
        self._server = server
        self.reset()
        server.start_recording()

    def reset(self) -> None:
        self._server.reset_recording()

    def list(self) -> list[RecordedRequest]:
        return self._server.recorded()

    def count(self, method: str | None = None) -> int:
        return sum(1 for r in self.list() if method is None or r.method == method)

    def stop(self) -> None:
        self._server.stop_recording()


class S3Session:
    """What a test needs of the S3 server: ``endpoint_url``, ``storage_options`` (for
    fsspec/s3fs), ``fs()``, ``arrow_fs()``, ``client()``, ``bucket()``, ``upload()``, ``objects()``,
    ``pending_uploads()``. Its own calls (``bucket``, ``upload``, ``objects``,
    ``pending_uploads``) are never recorded."""

    def __init__(self, server: S3Server) -> None:
        self.server = server
        self.endpoint_url = server.endpoint_url
        self.storage_options = s3_storage_options(server.endpoint_url)
        self.faults = server.faults
        self._buckets = 0
        self._lock = threading.Lock()
        self._client: Any = None

    def fs(self, **options: Any) -> Any:
        """A fresh s3fs filesystem on the server, its listing cache off (``options`` override)."""
        import s3fs

        kwargs = {**self.storage_options, "use_listings_cache": False, **options}
        return s3fs.S3FileSystem(**kwargs)

    def arrow_fs(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on the server."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            scheme="http",
            endpoint_override=f"{HOST}:{self.server.port}",
        )

    def client(self) -> Any:
        """A boto3 S3 client on the server (its calls are recorded like any other)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def _own_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self.client()
            return self._client

    def bucket(self) -> str:
        """A new, empty bucket's name."""
        with self._lock:
            self._buckets += 1
            name = f"test-{os.getpid()}-{self._buckets:04d}"
        with self.server.paused_recording():
            self._own_client().create_bucket(Bucket=name)
        return name

    def upload(self, local_path: str | os.PathLike[str], url: str) -> str:
        """Upload a local file to ``url`` (``s3://bucket/key`` or ``bucket/key``); the URL."""
        bucket, key = split_s3_url(url)
        with self.server.paused_recording():
            self._own_client().upload_file(os.fspath(local_path), bucket, key)
        return f"s3://{bucket}/{key}"

    def objects(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """The objects under ``prefix``: key -> size."""
        found: dict[str, int] = {}
        with self.server.paused_recording():
            pages = self._own_client().get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=bucket, Prefix=prefix):
                found.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        return found

    def pending_uploads(self, bucket: str) -> list[str]:
        """The keys of the multipart uploads started and neither completed nor aborted."""
        with self.server.paused_recording():
            listed = self._own_client().list_multipart_uploads(Bucket=bucket)
        return [u["Key"] for u in listed.get("Uploads", [])]


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` or ``bucket/key`` -> (bucket, key)."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise ValueError(f"not an S3 object URL: {url!r}")
    return bucket, key


# --- the HTTP server -------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str  # the request path, e.g. "/data/f.parquet"
    range: str | None


class RequestLog:
    """The requests a server received, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[HttpRequest] = []

    def add(self, request: HttpRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def list(self) -> list[HttpRequest]:
        with self._lock:
            return list(self._requests)

    def count(self, method: str | None = None) -> int:
        return sum(1 for r in self.list() if method is None or r.method == method)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()

    def __iter__(self) -> Iterator[HttpRequest]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self.list())


def parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """The inclusive byte span a ``Range`` header asks of a ``size``-byte file: None to serve
    the whole file (no header, a syntax we do not serve, several ranges: RFC 9110 lets a
    server ignore Range), ``"unsatisfiable"`` for a 416."""
    if header is None or not header.startswith("bytes=") or "," in header:
        return None
    first, dash, last = header[len("bytes=") :].strip().partition("-")
    if not dash or not (first.isdigit() or last.isdigit()):
        return None
    if not first:  # bytes=-n: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None  # invalid: ignored
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


class _RangeServer(ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    mode: str
    stall: float
    log: RequestLog
    stopping: threading.Event
    faults: Faults

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a test's timeout, a reader that stops early) is no server
        # error: not printed over the tests' output. Anything else is, as the stdlib does.
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)


class _RangeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length
    timeout = 30  # an idle kept-alive connection ends after this
    server: _RangeServer
    _fault: FaultRule | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _file(self) -> Path | None:
        relative = unquote(urlsplit(self.path).path).lstrip("/")
        path = (self.server.root / relative).resolve()
        root = self.server.root.resolve()
        if root not in path.parents or not path.is_file():
            return None
        return path

    def _begin(self) -> Path | None:
        self.server.log.add(HttpRequest(self.command, self.path, self.headers.get("Range")))
        url = urlsplit(self.path)
        self._fault = self.server.faults.fault_for(self.command, url.path, url.query)
        mode = self._fault.mode if self._fault is not None else None
        if self.server.mode == "stall" or mode in ("stall", "drop", "lose_reply"):
            if self.server.mode == "stall":
                self.server.stopping.wait(self.server.stall)
            elif mode == "stall":
                self.server.faults.wait_stalled()
            close_abruptly(self.connection, reset=mode == "lose_reply")
            self.close_connection = True
            return None
        if self._fault is not None and mode == "status":
            self.send_error(self._fault.status)
            return None
        path = self._file()
        if path is None:
            self.send_error(HTTPStatus.NOT_FOUND)
        return path

    def do_HEAD(self) -> None:
        path = self._begin()
        if path is None:
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_GET(self) -> None:
        path = self._begin()
        if path is None:
            return
        data = path.read_bytes()
        span = parse_range(self.headers.get("Range"), len(data))
        if span == "unsatisfiable":
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if isinstance(span, tuple):
            start, end = span
            body = data[start : end + 1]
            self.send_response(HTTPStatus.PARTIAL_CONTENT)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = data
            self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        mode = self._fault.mode if self._fault is not None else None
        if self.server.mode == "short" or mode in ("short", "reset"):
            # Half the announced body, then the connection closes (with a reset in "reset").
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            close_abruptly(self.connection, reset=mode == "reset")
            self.close_connection = True
            return
        self.wfile.write(body)


class HttpServer(_Running):
    """A running range server: ``root`` (the directory it serves), ``url(name)``,
    ``requests`` (its ``RequestLog``), ``faults`` (``Faults``: fail chosen requests in any of
    ``FAULT_MODES``; "lose_reply" closes the connection with a reset, unanswered), ``stop()``."""

    def __init__(self, root: Path, mode: str = "ok", stall: float = 20.0) -> None:
        if mode not in ("ok", "short", "stall"):
            raise ValueError(f"mode is 'ok', 'short' or 'stall', not {mode!r}")
        self.root = Path(root)
        self.requests = RequestLog()
        self._server = _RangeServer((HOST, 0), _RangeHandler)
        self._server.root = self.root
        self._server.mode = mode
        self._server.stall = stall
        self._server.log = self.requests
        self._server.stopping = threading.Event()
        self.faults = self._server.faults = Faults(stall)
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://{HOST}:{self.port}"
        self._run(self._server, f"http-{mode}")

    def url(self, name: str) -> str:
        """The URL of ``root / name``."""
        return f"{self.base_url}/{name.lstrip('/')}"

    def stop(self) -> None:
        self._server.stopping.set()  # a stalled answer ends now
        self.faults.released.set()
        self._halt()


def start_http_server(root: Path, mode: str = "ok", stall: float = 20.0) -> HttpServer:
    """Serve ``root`` on 127.0.0.1 (a free port). ``mode``: ``"ok"``; ``"short"`` (every GET's
    body half of its Content-Length, then the connection closes); ``"stall"`` (every request
    read, then nothing for ``stall`` seconds, then the connection closes)."""
    return HttpServer(root, mode, stall)


if __name__ == "__main__":
    raise SystemExit(_serve())
