"""JSON to dataclasses and back, driven by the dataclasses' type hints.

The models are plain dataclasses, so one small decoder reads every answer of the server: it
follows each field's annotation (nested dataclasses, lists, dicts, optionals, datetimes) and
ignores fields it does not know, so a newer server that adds a field does not break an older
client. It must not validate beyond the types: the server is the authority on values.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")

# RFC 3339 with any number of fraction digits (the server writes nanoseconds, which
# `datetime.fromisoformat` of Python 3.10 cannot read).
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


_FROMISOFORMAT_READS_RFC3339 = sys.version_info >= (3, 11)
"""From 3.11 `datetime.fromisoformat` reads any number of fraction digits and `Z`, ten times
faster than the pattern (a received message carries three times)."""


def parse_datetime(text: str) -> datetime:
    """Reads an RFC 3339 timestamp into an aware `datetime` (microsecond precision)."""
    if _FROMISOFORMAT_READS_RFC3339:
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            value = None
        if value is not None and value.tzinfo is not None:
            return value
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
    return typing.cast(T, _decoder(cls)(data))


Decoder = Callable[[Any], Any]

_decoders: dict[Any, Decoder] = {}
"""One decoder per annotation, built on first use: reading an answer then follows a plan
instead of inspecting type hints per field and per message (a receive of 100 messages reads
a few thousand fields)."""


def _decoder(annotation: Any) -> Decoder:
    found = _decoders.get(annotation)
    if found is None:
        found = _build(annotation)
        _decoders[annotation] = found
    return found


def _keep(data: Any) -> Any:
    return data


def _build(annotation: Any) -> Decoder:
    if annotation is Any:
        return _keep
    origin = get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(options) != 1:
            return _keep
        (option,) = options
        return lambda data: None if data is None else _decoder(option)(data)
    if origin is list:
        (item,) = get_args(annotation)
        return lambda data: [_decoder(item)(value) for value in _expect(list, data, annotation)]
    if origin is dict:
        _, item = get_args(annotation)
        return lambda data: {
            key: _decoder(item)(value) for key, value in _expect(dict, data, annotation).items()
        }
    if annotation is datetime:
        return lambda data: parse_datetime(_expect(str, data, annotation))
    if annotation is float:
        return _float
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return _dataclass_decoder(annotation)
    if isinstance(annotation, type):
        kind = annotation
        return lambda data: data if type(data) is kind else _expect(kind, data, kind)
    return _keep


def _float(data: Any) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise TypeError(f"expected a number, got {data!r}")
    return float(data)


def _dataclass_decoder(cls: type) -> Decoder:
    # The field decoders are found on the first call, not here: a dataclass may refer to
    # itself, and building eagerly would not end. The plan is assigned whole, so a thread
    # never sees half of one.
    plan: list[tuple[str, Decoder]] | None = None

    def decode_dataclass(data: Any) -> Any:
        nonlocal plan
        steps = plan
        if steps is None:
            hints = get_type_hints(cls)
            steps = [
                (field.name, _decoder(hints[field.name]))
                for field in dataclasses.fields(cls)
                if field.init
            ]
            plan = steps
        fields = _expect(dict, data, cls)
        return cls(**{name: read(fields[name]) for name, read in steps if name in fields})

    return decode_dataclass


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


_PLAIN = (str, int, float, bool, type(None))
_field_names: dict[type, tuple[str, ...]] = {}


def encode(value: Any) -> Any:
    """Turns a request dataclass into JSON: `UNSET` fields are left out, `None` is null."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, datetime):
        return format_datetime(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        names = _field_names.get(kind)
        if names is None:
            names = tuple(field.name for field in dataclasses.fields(value))
            _field_names[kind] = names
        out = {}
        for name in names:
            item = getattr(value, name)
            if not isinstance(item, Unset):
                out[name] = encode(item)
        return out
    return value


def drop_none(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that were given."""
    return {key: value for key, value in fields.items() if value is not None}
