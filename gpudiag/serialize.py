"""Machine model <-> plain JSON data, strict in both directions.

A missing reading is written as ``{"unavailable": "<reason>", "detail": "..."}`` so that
JSON consumers never mistake it for a value. Loading rejects unknown keys, wrong types
and missing fields, naming the path, because a fixture with a typo must not silently
describe a different machine.
"""

from __future__ import annotations

import enum
import importlib
import sys
import types
import typing
from typing import Any, TypeVar, Union

import msgspec

from gpudiag.model import Reading, Reason

T = TypeVar("T")


class SchemaError(ValueError):
    """Data does not describe a valid model object; the message names the path."""


def to_data(obj: Any) -> Any:
    """Convert model objects to JSON-ready data (dicts, lists, numbers, strings)."""
    if isinstance(obj, Reading):
        if obj.reason is not None:
            out: dict[str, Any] = {"unavailable": obj.reason.value}
            if obj.detail:
                out["detail"] = obj.detail
            return out
        return to_data(obj.value)
    if isinstance(obj, msgspec.Struct):  # the model
        return {name: to_data(getattr(obj, name)) for name in obj.__struct_fields__}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (tuple, list)):
        return [to_data(item) for item in obj]
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    return obj


def from_data(cls: type[T], data: Any, path: str = "$") -> T:
    """Build a model object of type ``cls`` from JSON data, strictly."""
    return typing.cast(T, _load(cls, data, path))


_HINTS: dict[tuple[type, str], Any] = {}

# Types that model modules name only under TYPE_CHECKING, so that importing the model does
# not create them: resolved (imported) only when data for such a field is loaded.
_LAZY_TYPES = {"GpuDetails": ("gpudiag.details", "GpuDetails")}


def _hint(cls: type, name: str, annotation: Any) -> Any:
    key = (cls, name)
    if key not in _HINTS:
        if isinstance(annotation, str):
            annotation = _evaluated(cls.__module__, annotation)
        _HINTS[key] = annotation
    return _HINTS[key]


# A string annotation evaluated once per module (many fields share one: ``Reading[int]``), in a copy
# of the module's namespace made once: a replay's load evaluates ~30 distinct ones, not ~110.
_EVALUATED: dict[tuple[str, str], Any] = {}
_NAMESPACES: dict[str, dict[str, Any]] = {}


def _evaluated(module: str, annotation: str) -> Any:
    key = (module, annotation)
    if key not in _EVALUATED:
        namespace = _NAMESPACES.get(module)
        if namespace is None:
            namespace = _NAMESPACES[module] = dict(vars(sys.modules[module]))
        for lazy, (where, attr) in _LAZY_TYPES.items():
            if lazy in annotation and lazy not in namespace:
                namespace[lazy] = getattr(importlib.import_module(where), attr)
        _EVALUATED[key] = eval(annotation, namespace)
    return _EVALUATED[key]


def _fields(cls: Any) -> dict[str, tuple[Any, bool]]:
    """Each field of a model Struct: its annotation (maybe still a string) and whether data must give it."""
    names = cls.__struct_fields__
    optional = len(cls.__struct_defaults__)  # defaults belong to the last fields
    annotations = typing.cast(dict[str, Any], cls.__annotations__)
    return {n: (annotations[n], i < len(names) - optional) for i, n in enumerate(names)}


def _load(tp: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Reading:
        if isinstance(data, dict) and "unavailable" in data:
            extra = set(data) - {"unavailable", "detail"}
            if extra:
                raise SchemaError(f"{path}: unknown keys {sorted(extra)}")
            try:
                reason = Reason(data["unavailable"])
            except ValueError:
                choices = ", ".join(r.value for r in Reason)
                raise SchemaError(f"{path}: unknown reason {data['unavailable']!r} (one of: {choices})") from None
            detail = data.get("detail", "")
            if not isinstance(detail, str):
                raise SchemaError(f"{path}.detail: expected a string")
            return Reading.missing(reason, detail)
        if data is None:
            raise SchemaError(f'{path}: null is not a reading; write {{"unavailable": reason}}')
        return Reading(value=_load(args[0], data, path))
    if origin in (Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if data is None and len(non_none) < len(args):
            return None
        if len(non_none) == 1:
            return _load(non_none[0], data, path)
        raise SchemaError(f"{path}: unsupported union {tp}")  # pragma: no cover
    if origin is tuple:
        if not isinstance(data, list):
            raise SchemaError(f"{path}: expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_load(args[0], item, f"{path}[{i}]") for i, item in enumerate(data))
        if len(data) != len(args):
            raise SchemaError(f"{path}: expected {len(args)} items, got {len(data)}")
        return tuple(_load(a, item, f"{path}[{i}]") for i, (a, item) in enumerate(zip(args, data, strict=True)))
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: expected an object, got {type(data).__name__}")
        fields = _fields(tp)
        unknown = set(data) - set(fields)
        if unknown:
            raise SchemaError(f"{path}: unknown keys {sorted(unknown)}")
        kwargs = {}
        for name, (annotation, required) in fields.items():
            if name in data:
                kwargs[name] = _load(_hint(tp, name, annotation), data[name], f"{path}.{name}")
            elif required:
                raise SchemaError(f"{path}: missing key {name!r}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            choices = ", ".join(str(m.value) for m in tp)
            raise SchemaError(f"{path}: {data!r} is not one of: {choices}") from None
    if tp is bool:
        if not isinstance(data, bool):
            raise SchemaError(f"{path}: expected true/false, got {data!r}")
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise SchemaError(f"{path}: expected an integer, got {data!r}")
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise SchemaError(f"{path}: expected a number, got {data!r}")
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise SchemaError(f"{path}: expected a string, got {data!r}")
        return data
    raise SchemaError(f"{path}: cannot load type {tp}")  # pragma: no cover
