"""JSON → the typed models, driven by the dataclasses' own annotations (one decoder for all)."""

from __future__ import annotations

import dataclasses
import keyword
import types
from datetime import UTC, date, datetime
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


def parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


_FIELDS: dict[type, tuple[tuple[str, str, Any], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, JSON key, type) per field; `from_` reads the JSON key `from`."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = get_type_hints(cls)
    out = []
    for field in dataclasses.fields(cls):
        key = field.name
        if key.endswith("_") and keyword.iskeyword(key[:-1]):
            key = key[:-1]
        out.append((field.name, key, hints[field.name]))
    _FIELDS[cls] = tuple(out)
    return _FIELDS[cls]


def decode(cls: type[T], data: Any) -> T:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(data).__name__}")
    values = {}
    for name, key, hint in _fields(cls):
        if key in data:
            values[name] = _value(hint, data[key])
    return cls(**values)


def _value(hint: Any, value: Any) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [arg for arg in get_args(hint) if arg is not type(None)]
        return _value(inner, value)
    if value is None:
        return None
    if origin is list:
        (item,) = get_args(hint)
        return [_value(item, v) for v in value]
    if origin is dict or origin is Literal or hint is Any:
        return value
    if hint is datetime:
        return parse_timestamp(value)
    if hint is date:
        return date.fromisoformat(value)
    if hint is float:
        return float(value)
    if dataclasses.is_dataclass(hint):
        return decode(hint, value)  # type: ignore[arg-type]
    return value
