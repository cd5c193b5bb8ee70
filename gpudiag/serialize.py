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
from collections.abc import Callable
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
    return typing.cast(T, _loader(cls)(data, path))


# A loader per type, made at its first use: what each value's type asks (its origin, arguments,
# fields) is worked out once per type, not once per value (a replay's machine holds ~1,300 of them).
Loader = Callable[[Any, str], Any]
_LOADERS: dict[Any, Loader] = {}

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


def _loader(tp: Any) -> Loader:
    found = _LOADERS.get(tp)
    if found is None:
        found = _LOADERS[tp] = _new_loader(tp)
    return found


def _new_loader(tp: Any) -> Loader:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Reading:
        return _reading_loader(args[0])
    if origin in (Union, types.UnionType):
        return _union_loader(tp, args)
    if origin is tuple:
        return _tuple_loader(args)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _struct_loader(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_loader(tp)
    scalar = _SCALARS.get(tp)
    if scalar is not None:
        return scalar

    def unknown(data: Any, path: str) -> Any:  # pragma: no cover
        raise SchemaError(f"{path}: cannot load type {tp}")

    return unknown


def _reading_loader(inner: Any) -> Loader:
    load_value = _loader(inner)

    def load(data: Any, path: str) -> Any:
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
        return Reading(value=load_value(data, path))

    return load


def _union_loader(tp: Any, args: tuple[Any, ...]) -> Loader:
    non_none = [a for a in args if a is not type(None)]
    optional = len(non_none) < len(args)
    load_one = _loader(non_none[0]) if len(non_none) == 1 else None

    def load(data: Any, path: str) -> Any:
        if data is None and optional:
            return None
        if load_one is not None:
            return load_one(data, path)
        raise SchemaError(f"{path}: unsupported union {tp}")  # pragma: no cover

    return load


def _tuple_loader(args: tuple[Any, ...]) -> Loader:
    if len(args) == 2 and args[1] is Ellipsis:
        load_item = _loader(args[0])

        def load_all(data: Any, path: str) -> Any:
            if not isinstance(data, list):
                raise SchemaError(f"{path}: expected a list, got {type(data).__name__}")
            return tuple(load_item(item, f"{path}[{i}]") for i, item in enumerate(data))

        return load_all
    loaders = [_loader(a) for a in args]

    def load_each(data: Any, path: str) -> Any:
        if not isinstance(data, list):
            raise SchemaError(f"{path}: expected a list, got {type(data).__name__}")
        if len(data) != len(loaders):
            raise SchemaError(f"{path}: expected {len(loaders)} items, got {len(data)}")
        return tuple(load(item, f"{path}[{i}]") for i, (load, item) in enumerate(zip(loaders, data, strict=True)))

    return load_each


def _struct_loader(cls: Any) -> Loader:
    names: tuple[str, ...] = cls.__struct_fields__
    required = len(names) - len(cls.__struct_defaults__)  # defaults belong to the last fields
    known = frozenset(names)
    annotations = typing.cast(dict[str, Any], cls.__annotations__)
    fields: dict[str, Loader] = {}  # each field's loader, made when data first gives the field

    def load(data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: expected an object, got {type(data).__name__}")
        if not known.issuperset(data):
            raise SchemaError(f"{path}: unknown keys {sorted(set(data) - known)}")
        kwargs = {}
        for i, name in enumerate(names):
            if name in data:
                load_field = fields.get(name)
                if load_field is None:
                    load_field = fields[name] = _loader(_hint(cls, name, annotations[name]))
                kwargs[name] = load_field(data[name], f"{path}.{name}")
            elif i < required:
                raise SchemaError(f"{path}: missing key {name!r}")
        return cls(**kwargs)

    return load


def _enum_loader(tp: Any) -> Loader:
    def load(data: Any, path: str) -> Any:
        try:
            return tp(data)
        except ValueError:
            choices = ", ".join(str(m.value) for m in tp)
            raise SchemaError(f"{path}: {data!r} is not one of: {choices}") from None

    return load


def _load_bool(data: Any, path: str) -> Any:
    if not isinstance(data, bool):
        raise SchemaError(f"{path}: expected true/false, got {data!r}")
    return data


def _load_int(data: Any, path: str) -> Any:
    if isinstance(data, bool) or not isinstance(data, int):
        raise SchemaError(f"{path}: expected an integer, got {data!r}")
    return data


def _load_float(data: Any, path: str) -> Any:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise SchemaError(f"{path}: expected a number, got {data!r}")
    return float(data)


def _load_str(data: Any, path: str) -> Any:
    if not isinstance(data, str):
        raise SchemaError(f"{path}: expected a string, got {data!r}")
    return data


_SCALARS: dict[Any, Loader] = {bool: _load_bool, int: _load_int, float: _load_float, str: _load_str}
