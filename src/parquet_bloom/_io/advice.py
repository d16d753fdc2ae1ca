"""What a user can do about a store's failure that is theirs to fix: no credentials found,
credentials the store refuses, an endpoint where nothing answers (docs/cli.md#errors).

The object stores' clients (botocore under s3fs, aiohttp under the HTTP and Azure backends,
object_store inside deltalake) raise their own exceptions; :func:`what_to_do` tells these three
cases apart by the exception's class name and message, anywhere in its chain of causes, and
returns the one sentence the error message ends with (naming ``storage_options`` with the
command's ``--storage-option`` beside it, which :mod:`parquet_bloom.cli._flags` keeps).
Everything else a store raises (a 5xx, a reset, a timeout) may pass on retrying and gets no
advice. Pure: no IO.
"""

from __future__ import annotations

__all__ = ["what_to_do"]

# How each case shows: exception class names, then fragments of messages (deltalake gives
# object_store's errors as text only).
_NO_CREDENTIALS = (
    ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"),
    ("Unable to locate credentials", "no credentials", "Missing credentials"),
)
_REFUSED_CREDENTIALS = (
    (),
    ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"),
)
_NO_ANSWER = (
    ("EndpointConnectionError", "ClientConnectorError", "ConnectionRefusedError"),
    ("Could not connect to the endpoint", "Connection refused", "Cannot connect to host"),
)

CREDENTIALS = (
    "no credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
    "AWS_PROFILE), or pass key and secret as storage_options (--storage-option key=... "
    "--storage-option secret=...)"
)
REFUSED = (
    "the store refused the credentials: check the key, the secret and the session token in "
    "use (environment, profile, or storage_options (--storage-option key=...))"
)
UNREACHABLE = (
    "nothing answers at the store's endpoint: check that its server is running and that the "
    "endpoint is right: AWS_ENDPOINT_URL, or the one given in storage_options "
    "(--storage-option endpoint_url=...)"
)


def what_to_do(err: BaseException) -> str | None:
    """The sentence that tells the user what to do about ``err``, or None when it is not one
    of the failures a user fixes (see the module docstring)."""
    chain: list[BaseException] = []
    seen: BaseException | None = err
    while seen is not None and seen not in chain and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for (names, fragments), advice in (
        (_NO_CREDENTIALS, CREDENTIALS),
        (_REFUSED_CREDENTIALS, REFUSED),
        (_NO_ANSWER, UNREACHABLE),
    ):
        for one in chain:
            text = str(one)
            if type(one).__name__ in names or any(f in text for f in fragments):
                return advice
    return None
