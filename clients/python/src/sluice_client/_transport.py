"""What both clients share around a request: where the server is, the token, timeouts, and
turning an answer into a value or a `SluiceError`. Nothing here sends anything."""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

import httpx

from ._calls import Call
from ._codec import Unset
from .errors import SluiceError

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:7566"
"""Where `sluice serve` listens unless told otherwise."""

DEFAULT_TIMEOUT_S = 30.0
"""How long a request may take, beyond the time the server holds a long poll on purpose."""


def base_url(url: str | None) -> str:
    """`url`, else `SLUICE_URL`, else http://127.0.0.1:7566."""
    return (url or os.environ.get("SLUICE_URL") or DEFAULT_URL).rstrip("/")


def auth_headers(token: str | None) -> dict[str, str]:
    """`Authorization: Bearer` from `token`, else `SLUICE_TOKEN`; nothing without either."""
    token = token if token is not None else os.environ.get("SLUICE_TOKEN")
    headers = {"user-agent": "sluice-client-python/0.1"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def request_args(call: Call[Any], timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of `httpx.Client.request` for `call`."""
    args: dict[str, Any] = {
        "method": call.method,
        "url": call.path,
        "timeout": httpx.Timeout(timeout_s + call.wait_s, connect=min(timeout_s, 10.0)),
    }
    if call.params:
        args["params"] = call.params
    if not isinstance(call.body, Unset):
        args["content"] = json.dumps(call.body).encode()
        args["headers"] = {"content-type": "application/json"}
    return args


def read(call: Call[T], response: httpx.Response) -> T:
    """The value of a successful answer; a `SluiceError` for an error answer."""
    if response.status_code >= 400:
        raise error_of(response)
    if call.text:
        return call.parse(response.text)
    try:
        data = response.json()
    except ValueError as error:
        raise SluiceError(
            response.status_code,
            "malformed_answer",
            f"the server's answer is not JSON: {error}",
            request_id=response.headers.get("x-request-id"),
        ) from error
    return call.parse(data)


def error_of(response: httpx.Response) -> SluiceError:
    """The error a server's error answer describes (`{"error": {"code", "message", ...}}`)."""
    code, message, details = f"http_{response.status_code}", response.reason_phrase, None
    try:
        detail = response.json().get("error")
        if isinstance(detail, dict):
            code = str(detail.get("code", code))
            message = str(detail.get("message", message))
            details = detail.get("details")
    except (ValueError, AttributeError):
        # Not one of sluice's JSON errors (a proxy's page, say): the status says enough.
        pass
    return SluiceError(
        response.status_code,
        code,
        message,
        details=details,
        retry_after=_retry_after(response.headers.get("retry-after")),
        request_id=response.headers.get("x-request-id"),
    )


def unreachable(error: httpx.HTTPError) -> SluiceError:
    """A request that got no answer: `timeout` when none came in time, else `unreachable` (no
    connection, or it broke); the same codes as the TypeScript SDK."""
    code = "timeout" if isinstance(error, httpx.TimeoutException) else "unreachable"
    return SluiceError(0, code, f"{type(error).__name__}: {error}")


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        # An HTTP date: sluice never sends one, so the hint is dropped rather than guessed.
        return None
