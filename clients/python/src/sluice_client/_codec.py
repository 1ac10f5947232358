"""JSON to dataclasses and back, driven by the dataclasses' type hints.

The models are plain dataclasses, so one small decoder reads every answer of the server: it
follows each field's annotation (nested dataclasses, lists, dicts, optionals, datetimes) and
ignores fields it does not know, so a newer server that adds a field does not break an older
client. It must not validate beyond the types: the server is the authority on values.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")

_hints_cache: dict[type, dict[str, Any]] = {}

# RFC 3339 with any number of fraction digits (the server writes nanoseconds, which
# `datetime.fromisoformat` of Python 3.10 cannot read).
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_datetime(text: str) -> datetime:
    """Reads an RFC 3339 timestamp into an aware `datetime` (microsecond precision)."""
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    if offset in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if offset[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    return datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz
    )


def format_datetime(value: datetime) -> str:
    """Writes a `datetime` as RFC 3339 in UTC (a naive one is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def decode(cls: type[T], data: Any) -> T:
    """Builds a `cls` (a dataclass) from decoded JSON."""
    return typing.cast(T, _decode_value(cls, data))


def _hints(cls: type) -> dict[str, Any]:
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = get_type_hints(cls)
        _hints_cache[cls] = hints
    return hints


def _decode_value(annotation: Any, data: Any) -> Any:
    if annotation is Any:
        return data
    origin = get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        if data is None:
            return None
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _decode_value(options[0], data) if len(options) == 1 else data
    if origin is list:
        (item,) = get_args(annotation)
        return [_decode_value(item, value) for value in _expect(list, data, annotation)]
    if origin is dict:
        _, item = get_args(annotation)
        return {
            key: _decode_value(item, value)
            for key, value in _expect(dict, data, annotation).items()
        }
    if annotation is datetime:
        return parse_datetime(_expect(str, data, annotation))
    if annotation is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"expected a number, got {data!r}")
        return float(data)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        fields = _expect(dict, data, annotation)
        hints = _hints(annotation)
        kwargs = {
            field.name: _decode_value(hints[field.name], fields[field.name])
            for field in dataclasses.fields(annotation)
            if field.name in fields and field.init
        }
        return annotation(**kwargs)
    if isinstance(annotation, type):
        return _expect(annotation, data, annotation)
    return data


def _expect(kind: type[T], data: Any, annotation: Any) -> T:
    if not isinstance(data, kind) or (kind is int and isinstance(data, bool)):
        raise TypeError(f"expected {annotation!r}, got {data!r}")
    return data


class Unset:
    """The type of `UNSET`: a field left out of a request (where `None` sends JSON null)."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET = Unset()
"""Leaves a field out of a request: the server keeps its current value (or default)."""


def encode(value: Any) -> Any:
    """Turns a request dataclass into JSON: `UNSET` fields are left out, `None` is null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: encode(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if not isinstance(getattr(value, field.name), Unset)
        }
    if isinstance(value, datetime):
        return format_datetime(value)
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    return value


def drop_none(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that were given."""
    return {key: value for key, value in fields.items() if value is not None}
