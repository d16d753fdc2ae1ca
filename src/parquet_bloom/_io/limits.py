"""How long a request to a store may take, and how often it is tried: one budget for every
backend.

A :class:`RequestLimits` says three things: ``timeout``, the seconds a request may wait to
connect and then between bytes of its answer; ``retries``, how many times a request that timed
out or failed in passing (a dropped connection, a 5xx) is tried again; and ``deadline``, the
seconds one read may take in all, every attempt and back-off included (by default: each
attempt's timeout plus :data:`BACKOFF_ALLOWANCE` a retry).

The budget in force is process-wide (the library's worker threads read it too):
:func:`request_limits` sets it and gives back a handle that restores the one before, at the
end of a ``with`` block or by :meth:`LimitsSetting.restore`; :func:`get_request_limits` tells
it. The command line sets it from ``--timeout`` and ``--retries``.

Every backend learns the budget through its own options, set here and nowhere else
(:func:`storage_options_with_limits` for fsspec's, :func:`delta_storage_options` for
deltalake's, :func:`arrow_s3_options` for ``pyarrow.fs.S3FileSystem``), each merged *under*
what the caller passed: an option given explicitly is never changed. Where a backend cannot
bound a stalled request itself (gcsfs and adlfs retry on their own, a filesystem object built by
the caller keeps its settings), the IO layer stops waiting at the deadline
(:func:`deadline_kwargs`). A read that timed out is a located
:class:`~parquet_bloom.errors.FileReadError` saying so (:func:`timeout_error`).
docs/object-storage.md ("Timeouts and retries") says which option each backend gets.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from parquet_bloom.errors import FileReadError

__all__ = [
    "BACKOFF_ALLOWANCE",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "LimitsSetting",
    "RequestLimits",
    "arrow_s3_options",
    "configure_filesystem",
    "deadline_kwargs",
    "delta_storage_options",
    "get_request_limits",
    "located_timeouts",
    "request_limits",
    "storage_defaults",
    "storage_options_with_limits",
    "timeout_error",
]

# Seconds a request may wait to connect, and then for each next bytes of its answer. Stores
# answer a ranged GET in tens of milliseconds and stream at ~100 MB/s, so a request silent for
# this long is stalled, not slow; it is also object_store's (deltalake's) own default request
# timeout. (s3fs's default read timeout is 15 s, but its own loop repeats botocore's attempts
# up to five times over: a stalled read waited minutes.)
DEFAULT_TIMEOUT = 30.0
# Retries after a first attempt that timed out or failed in passing: three attempts in all,
# as pyarrow's and botocore's standard retry strategies make.
DEFAULT_RETRIES = 2
# Seconds of back-off the deadline allows a retry, on top of each attempt's timeout: botocore's
# standard mode waits a random time up to 2**(n-1) s before its n-th retry (1, 2, 4 s for the
# first), s3fs 0.1 * 1.7**n s, the HTTP middleware here 0.2, 0.4... s.
BACKOFF_ALLOWANCE = 5.0


@dataclass(frozen=True)
class RequestLimits:
    """A request budget: ``timeout`` seconds a request may wait to connect and then between
    bytes of its answer, ``retries`` further attempts after a failed one, and ``deadline``
    seconds for one read in all (None: ``(retries + 1) * timeout`` plus
    :data:`BACKOFF_ALLOWANCE` a retry)."""

    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    deadline: float | None = None

    def __post_init__(self) -> None:
        for name in ("timeout", "deadline"):
            value = getattr(self, name)
            if value is None and name == "deadline":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int):
            raise TypeError(f"retries must be an integer, not {type(self.retries).__name__}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")

    @property
    def attempts(self) -> int:
        """Attempts a request gets: the first and its retries."""
        return self.retries + 1

    @property
    def total(self) -> float:
        """Seconds one read may take in all: ``deadline``, or what its attempts may take."""
        if self.deadline is not None:
            return float(self.deadline)
        return self.attempts * float(self.timeout) + self.retries * BACKOFF_ALLOWANCE

    def arrow_s3_options(self, **options: Any) -> dict[str, Any]:
        """Keyword arguments for a ``pyarrow.fs.S3FileSystem`` under this budget, ``options``
        over them: ``connect_timeout`` and ``request_timeout`` (seconds) and
        ``retry_strategy=AwsStandardS3RetryStrategy(max_attempts=retries)`` (pyarrow counts
        retries there). The library makes no pyarrow filesystem itself: this is for one the
        caller makes and passes."""
        import pyarrow.fs as pafs

        defaults: dict[str, Any] = {
            "connect_timeout": float(self.timeout),
            "request_timeout": float(self.timeout),
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=self.retries),
        }
        return {**defaults, **options}

    def describe(self) -> str:
        """The budget in words, as a timeout error states it."""
        tries = "1 attempt" if self.attempts == 1 else f"{self.attempts} attempts"
        return f"{_seconds(self.timeout)} a request, {tries}, {_seconds(self.total)} in all"


_lock = threading.Lock()
_current = RequestLimits()


def get_request_limits() -> RequestLimits:
    """The budget in force (:func:`request_limits` sets it)."""
    return _current


class LimitsSetting:
    """A budget set by :func:`request_limits`: ``limits`` (now in force) and ``previous``
    (what was). Used as a context manager it restores ``previous`` on exit; :meth:`restore`
    does the same at any time."""

    def __init__(self, limits: RequestLimits, previous: RequestLimits) -> None:
        self.limits = limits
        self.previous = previous

    def restore(self) -> None:
        """Put back the budget in force before this one was set."""
        global _current
        with _lock:
            _current = self.previous

    def __enter__(self) -> RequestLimits:
        return self.limits

    def __exit__(self, *exc: object) -> None:
        self.restore()


def request_limits(
    limits: RequestLimits | None = None,
    *,
    timeout: float | None = None,
    retries: int | None = None,
    deadline: float | None = None,
) -> LimitsSetting:
    """Set the request budget of every call that follows, in every thread, and return a
    handle that restores the one before: ``with request_limits(timeout=5, retries=1): ...``,
    or ``setting = request_limits(timeout=5)`` ... ``setting.restore()``.

    ``limits`` replaces the budget whole; ``timeout``, ``retries`` and ``deadline`` change
    those parts of the budget in force (or of ``limits``) and keep the others. A filesystem
    is configured when it is made: filesystems fsspec already cached for the same options
    keep theirs."""
    global _current
    with _lock:
        previous = _current
        chosen = limits if limits is not None else previous
        changes: dict[str, Any] = {}
        if timeout is not None:
            changes["timeout"] = timeout
        if retries is not None:
            changes["retries"] = retries
        if deadline is not None:
            changes["deadline"] = deadline
        elif timeout is not None or retries is not None:
            changes["deadline"] = chosen.deadline  # an explicit deadline stays explicit
        _current = replace(chosen, **changes) if changes else chosen
        return LimitsSetting(_current, previous)


# -- each backend's own options ---------------------------------------------------------------

_S3 = frozenset({"s3", "s3a"})
_GCS = frozenset({"gs", "gcs"})
_AZURE_BLOB = frozenset({"abfs", "abfss", "az"})
_HTTP = frozenset({"http", "https"})


def _seconds(value: float) -> str:
    return f"{value:g} s"


def storage_defaults(protocol: str, limits: RequestLimits | None = None) -> dict[str, Any]:
    """The options that give ``protocol``'s fsspec backend the budget ``limits`` (default:
    the one in force), in that backend's own names; empty for a backend without such options
    (``memory://``, local files, a chained URL).

    - s3fs: botocore's ``config_kwargs`` ``connect_timeout`` and ``read_timeout`` (seconds,
      each read of the answer), ``retries={"total_max_attempts": attempts, "mode":
      "standard"}`` (botocore's ``max_attempts`` would count retries only)
      (botocore retries timeouts, dropped connections, 5xx and throttling). s3fs's own
      loop, which repeats botocore's whole sequence up to 5 times, is a class attribute, not
      an option: :func:`configure_filesystem` holds it to 2 rounds.
    - gcsfs: ``requests_timeout``, an ``aiohttp.ClientTimeout`` (connect, read); gcsfs's
      retries (6, fixed in its code) are bounded by the deadline.
    - adlfs: ``connection_timeout`` and ``read_timeout``; the Azure SDK's retries are bounded
      by the deadline.
    - fsspec's HTTP: ``client_kwargs={"timeout": aiohttp.ClientTimeout(sock_connect, sock_read),
      "middlewares": (a retry of requests that timed out or dropped,)}`` (aiohttp's default
      is 300 s in all and no retry).
    """
    limits = limits or _current
    scheme = protocol.lower()
    timeout = float(limits.timeout)
    if scheme in _S3:
        return {
            "config_kwargs": {
                "connect_timeout": timeout,
                "read_timeout": timeout,
                "retries": {"total_max_attempts": limits.attempts, "mode": "standard"},
            },
        }
    if scheme in _GCS:
        return {"requests_timeout": _client_timeout(timeout)}
    if scheme in _AZURE_BLOB:
        return {"connection_timeout": timeout, "read_timeout": timeout}
    if scheme in _HTTP:
        client: dict[str, Any] = {"timeout": _client_timeout(timeout)}
        if _has_middlewares():
            client["middlewares"] = (RetryStalled(limits.retries),)
        return {"client_kwargs": client}
    return {}


def _has_middlewares() -> bool:
    """Whether aiohttp's client takes middlewares (3.12 and later); before, the HTTP backend
    gets the timeouts only, and the deadline bounds a read."""
    import aiohttp

    return "middlewares" in inspect.signature(aiohttp.ClientSession.__init__).parameters


def configure_filesystem(filesystem: Any) -> None:
    """What the budget needs of an s3fs filesystem made for it that its options cannot say
    (only filesystems made from options holding the budget get here; fsspec caches them by
    those options):

    - s3fs's own retry loop, which repeats botocore's whole sequence of attempts (5 rounds, a
      class attribute ``retries``, not a constructor option), is held to 2 rounds (1 without
      retries), so that attempts do not multiply: the second round is there for a body cut
      short after its headers, which botocore does not retry;
    - its ``call_s3`` (the requests of the S3 sink: PutObject, the multipart upload's)
      stops waiting at the deadline: botocore's read timeout does not end a PutObject whose
      ``Expect: 100-continue`` is never answered.
    """
    if not type(filesystem).__module__.startswith("s3fs"):
        return
    if hasattr(filesystem, "retries"):
        filesystem.retries = 2 if _current.retries else 1
    call = getattr(filesystem, "call_s3", None)
    if call is None or getattr(call, "bounded_by_deadline", False) or not deadline_kwargs(call):
        return

    def bounded(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", _current.total)  # fsspec.asyn.sync's deadline
        return call(*args, **kwargs)

    bounded.bounded_by_deadline = True  # type: ignore[attr-defined]
    filesystem.call_s3 = bounded


def _client_timeout(timeout: float) -> Any:
    import aiohttp  # the HTTP, GCS backends' own dependency

    return aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)


def storage_options_with_limits(url: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` for the filesystem of ``url``, with the budget's defaults
    (:func:`storage_defaults`) under them: an option the caller gave is kept as given, and
    in a dict-valued option (``config_kwargs``, ``client_kwargs``) each key the caller gave."""
    given = dict(options or {})
    if "::" in url or "://" not in url:
        return given  # a chained URL takes per-protocol options: left as they are
    defaults = storage_defaults(url.split("://", 1)[0])
    merged = dict(defaults)
    for key, value in given.items():
        default = merged.get(key)
        if isinstance(default, dict) and isinstance(value, Mapping):
            merged[key] = {**default, **value}
        else:
            merged[key] = value
    return merged


_OBJECT_STORE_SCHEMES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl", "http", "https"}
)


def delta_storage_options(uri: str, options: Mapping[str, str] | None) -> dict[str, str] | None:
    """deltalake's ``storage_options`` for the table at ``uri`` with the budget under them:
    object_store's ``timeout`` (a whole request, answer included) and ``connect_timeout``, and
    delta-rs's ``max_retries`` and ``retry_timeout`` (no retry starts after it). Keys are
    matched without regard to case, as deltalake reads them; a key given is kept. A table on
    local disk gets ``options`` as they are (None stays None)."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    if scheme not in _OBJECT_STORE_SCHEMES:
        return None if options is None else dict(options)
    limits = _current
    given = dict(options or {})
    present = {key.lower() for key in given}
    defaults = {
        "timeout": _duration(limits.timeout),
        "connect_timeout": _duration(limits.timeout),
        "max_retries": str(limits.retries),
        "retry_timeout": _duration(limits.total),
    }
    return {**{k: v for k, v in defaults.items() if k not in present}, **given}


def _duration(seconds: float) -> str:
    """A duration as object_store parses it (humantime): whole milliseconds."""
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def arrow_s3_options(options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:meth:`RequestLimits.arrow_s3_options` of the budget in force."""
    return _current.arrow_s3_options(**dict(options or {}))


# -- the HTTP backend's retries -----------------------------------------------------------------

# What a retried HTTP request may have met: no answer in time, a connection dropped or refused.
_RETRIED_STATUS = frozenset({500, 502, 503, 504})


class RetryStalled:
    """An aiohttp client middleware (aiohttp >= 3.12) that tries a request again, up to
    ``retries`` times, when it timed out, its connection failed, or it was answered with a
    5xx: fsspec's HTTP filesystem never retries. Its repr names its setting, so fsspec's
    cache of filesystems tells two budgets apart."""

    def __init__(self, retries: int) -> None:
        self.retries = retries

    def __repr__(self) -> str:
        return f"RetryStalled(retries={self.retries})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryStalled) and other.retries == self.retries

    def __hash__(self) -> int:
        return hash(("RetryStalled", self.retries))

    async def __call__(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        import aiohttp

        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            if attempt:
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            try:
                response = await handler(request)
            except (aiohttp.ClientConnectionError, asyncio.TimeoutError):
                if last:
                    raise
                continue
            if response.status in _RETRIED_STATUS and not last:
                response.release()
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover


# -- the deadline, where the backend cannot keep one ------------------------------------------


def deadline_kwargs(method: Callable[..., Any]) -> dict[str, Any]:
    """``{"timeout": seconds}`` for a blocking method of an fsspec async filesystem (which
    passes it to ``fsspec.asyn.sync``: the call is cancelled when the deadline passes), or
    nothing for a method that would not take it."""
    wrapped = getattr(method, "__wrapped__", None)
    if wrapped is not None and inspect.iscoroutinefunction(wrapped):
        return {"timeout": _current.total}
    return {}


_TIMEOUT_NAMES = ("timeout", "timedout", "timed out")


def is_timeout(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from, says a request took too long: Python's
    TimeoutError (asyncio's, aiohttp's), fsspec's FSTimeoutError, botocore's Read- and
    ConnectTimeoutError, or an error whose type or message says it timed out (pyarrow's and
    object_store's)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return True
        name = type(current).__name__.lower()
        text = str(current).lower()
        if any(word in name for word in _TIMEOUT_NAMES) or "timed out" in text:
            return True
        if "operation timeout" in text or "request timeout" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


def _cause(err: BaseException) -> str:
    """The error that timed out, in a few words: its type, and its message if it has one."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def timeout_error(
    err: BaseException,
    name: str,
    offset: int | None,
    length: int | None,
    elapsed: float,
) -> FileReadError | None:
    """A located :class:`FileReadError` for a read of ``name`` (``length`` bytes from
    ``offset``; no offset: the last ``length`` bytes; neither: the size lookup) that timed
    out after ``elapsed`` seconds; None when ``err`` is not a timeout."""
    if not is_timeout(err):
        return None
    limits = _current
    if offset is None and length is None:
        what = "looking up its size"
    elif offset is None:
        what = f"reading its last {length} bytes"
    elif length is None:
        what = f"reading from byte {offset}"
    else:
        what = f"reading bytes {offset}-{offset + length - 1}"
    return FileReadError(
        f"timed out after {elapsed:.1f} s {what} (request limits: {limits.describe()}); "
        "raise them with parquet_bloom.request_limits(timeout=..., retries=...) or the "
        f"command's --timeout/--retries ({_cause(err)})",
        source=name,
        offset=offset,
    )


@contextmanager
def located_timeouts(
    name: str, offset: int | None = None, length: int | None = None
) -> Iterator[None]:
    """A request made inside that timed out, as the located :class:`FileReadError` of
    :func:`timeout_error` (``offset`` and ``length`` as there); other errors pass as they
    are."""
    start = time.monotonic()
    try:
        yield
    except Exception as err:
        timed_out = timeout_error(err, name, offset, length, time.monotonic() - start)
        if timed_out is None:
            raise
        raise timed_out from err
