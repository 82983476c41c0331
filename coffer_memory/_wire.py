"""JSON shapes of the core's value objects, described once for every face (REST, MCP, yours).

Each field of a value object says what it means, and which limits the core enforces on it, in its
attrs metadata (``models.about``); a property says it in its docstring. A face declares a
``JsonShape``: which fields of one value object it sends, under which names, plus any face-only
fields. From the shape come

- ``shape.model``: a Pydantic model with the core's types mapped to JSON (``Path`` -> str, tuple
  -> list, pairs -> object, enum -> its values), descriptions and limits; for the OpenAPI document
  and the MCP output schemas;
- ``shape.dump(obj, **extra)``: the JSON-ready dict of a core object, without validating again what
  the core built and validated already (each response's hot path).

For inputs, ``json_field(cls, name)`` gives the ``Field`` (description and limits) of one core
field, for ``Annotated[...]`` parameters and request models, and ``json_items`` the limits of each
item of a list field. Nothing here is imported by ``import coffer_memory``: only faces use it.
"""

from __future__ import annotations

import enum
import operator
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

import attrs
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

__all__ = ["JsonExtra", "JsonShape", "core_field", "json_field", "json_items"]

_LIMITS = ("max_length", "min_length", "ge", "le", "gt", "lt")
Convert = Callable[[Any], Any] | None


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


@attrs.frozen
class CoreField:
    """One field (or property) of a core value object: its Python type and its metadata."""

    owner: type
    name: str
    annotation: Any
    metadata: Mapping[str, Any]

    @property
    def description(self) -> str | None:
        """What the field means, as the core describes it."""
        value = self.metadata.get("description")
        return str(value) if value is not None else None


def core_field(cls: type, name: str) -> CoreField:
    """The attrs field or property ``name`` of ``cls``, with its resolved type and metadata."""
    hints = _hints(cls)
    if name in hints and attrs.has(cls) and name in attrs.fields_dict(cls):
        return CoreField(cls, name, hints[name], attrs.fields_dict(cls)[name].metadata)
    prop = getattr(cls, name, None)
    if isinstance(prop, property) and prop.fget is not None:
        doc = (prop.fget.__doc__ or "").strip().split("\n\n")[0]
        ret = typing.get_type_hints(prop.fget)["return"]
        return CoreField(cls, name, ret, {"description": " ".join(doc.split())} if doc else {})
    raise AttributeError(f"{cls.__name__} has no field or property {name!r}")


def _hints(cls: type) -> dict[str, Any]:
    cached = _HINTS.get(cls)
    if cached is None:
        cached = _HINTS[cls] = typing.get_type_hints(cls)
    return cached


_HINTS: dict[type, dict[str, Any]] = {}


def _limits(meta: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    return {k: meta[prefix + k] for k in _LIMITS if prefix + k in meta}


def json_field(cls: type, name: str, **overrides: Any) -> Any:
    """The Pydantic ``Field`` of a core field: its description and limits (``overrides`` adds a
    default or the like); use it as ``Annotated[str | None, json_field(MemoryFact, "title")]``."""
    f = core_field(cls, name)
    return Field(**{"description": f.description, **_limits(f.metadata), **overrides})


def json_items(cls: type, name: str) -> Any:
    """The Pydantic ``Field`` with the limits of each item of a list field (e.g. one tag's length)."""
    return Field(**_limits(core_field(cls, name).metadata, "item_"))


@attrs.frozen
class JsonExtra:
    """A face-only field: not in the core object, its value passed to ``dump`` by the face."""

    annotation: Any
    description: str | None = None
    default: Any = ...
    """``...``: the face always passes a value."""


def _optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True  # noqa: UP007
    return tp, False


def _wire_type(tp: Any, nested: JsonShape | None) -> tuple[Any, Convert]:
    """The JSON-side annotation of a core type and the conversion of its values (None: as is)."""
    inner, optional = _optional(tp)
    annotation, convert = _wire_inner(inner, nested)  # dump() passes None by unconverted
    return (annotation | None if optional else annotation), convert


def _wire_inner(tp: Any, nested: JsonShape | None) -> tuple[Any, Convert]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if nested is not None and origin is not tuple:
        return nested.model, nested.dump
    if tp is Path:
        return str, str
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return Literal[tuple(m.value for m in tp)], lambda v: v.value
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        if typing.get_origin(item) is tuple and len(typing.get_args(item)) == 2:  # pairs -> object
            k, v = typing.get_args(item)
            return dict[k, v], dict  # type: ignore[valid-type]
        item_type, item_conv = _wire_inner(item, nested)
        if item_conv is None:
            return list[item_type], list  # type: ignore[valid-type]
        conv = item_conv
        return list[item_type], lambda vs: [conv(v) for v in vs]  # type: ignore[valid-type]
    if isinstance(tp, typing.TypeVar):
        raise TypeError(f"{tp} needs a nested shape")
    return tp, None


def _getter(path: str, absent: Any = None) -> Callable[[Any], Any]:
    parts = path.split(".")
    if len(parts) == 1:
        return operator.attrgetter(path)  # a C call: a REST recall's answer reads ~80 fields

    def get(obj: Any) -> Any:
        for part in parts:
            if obj is None:
                return absent
            obj = getattr(obj, part)
        return obj

    return get


def _default(core: CoreField) -> Any:
    field = attrs.fields_dict(core.owner).get(core.name) if attrs.has(core.owner) else None
    if field is None or field.default is attrs.NOTHING:
        return None
    factory = getattr(field.default, "factory", None)  # an attrs.Factory
    return factory() if callable(factory) else field.default


def _resolve(cls: type, path: str) -> tuple[CoreField, bool]:
    """The core field a dotted path ends at, and whether an object on the way may be None."""
    through_none = False
    owner = cls
    parts = path.split(".")
    for part in parts[:-1]:
        inner, optional = _optional(core_field(owner, part).annotation)
        through_none |= optional
        owner = inner
    return core_field(owner, parts[-1]), through_none


@attrs.frozen
class _Slot:
    name: str
    get: Callable[[Any], Any]
    convert: Convert
    annotation: Any
    info: FieldInfo
    core: CoreField | None


class JsonShape:
    """A face's JSON view of one core value object (see the module docstring).

    ``fields`` are wire names, or ``"wire=dotted.path"`` for a renamed or nested core field
    (``"text=fact.body"``); a name listed in ``extra`` is a face-only field. ``nested`` gives the
    shape of a field holding value objects (``{"hits": HIT}``). A path through an optional object
    gives null when it is None (or the field's core default, if it has one), unless the field is in
    ``present``: the face guarantees the object is there (``"store=target.store"`` of a listing).
    ``base`` is the model's base class (its config): by default extra keys are forbidden.
    """

    def __init__(
        self,
        name: str,
        source: type | None,
        doc: str,
        fields: Sequence[str],
        *,
        nested: Mapping[str, JsonShape] | None = None,
        extra: Mapping[str, JsonExtra] | None = None,
        present: Sequence[str] = (),
        base: type[BaseModel] = _Out,
    ) -> None:
        self.name = name
        self.source = source
        self.doc = doc
        self.extra = dict(extra or {})
        nested = dict(nested or {})
        slots = []
        for spec in fields:
            wire, _, path = spec.partition("=")
            if wire in self.extra:
                x = self.extra[wire]
                info = Field(description=x.description, default=x.default)
                slots.append(_Slot(wire, _extra_getter(wire, x), None, x.annotation, info, None))
                continue
            if source is None:
                raise TypeError(f"{name}.{wire}: a shape without a source has only extra fields")
            path = path or wire
            core, through_none = _resolve(source, path)
            # Limits bind inputs (json_field); an output says what a file holds, even a hand-edited one.
            annotation, convert = _wire_type(core.annotation, nested.get(wire))
            # Through a None on the way (``receipt.findings``) a field takes its core default, or null.
            absent = _default(core)
            if through_none and absent is None and wire not in present:
                annotation = annotation | None
            info = Field(description=core.description)
            slots.append(_Slot(wire, _getter(path, absent), convert, annotation, info, core))
        self.slots: tuple[_Slot, ...] = tuple(slots)
        self.model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            name,
            __base__=base,
            __doc__=doc,
            **{s.name: (s.annotation, s.info) for s in self.slots},
        )
        self._plan = [(s.name, s.get, s.convert) for s in self.slots]
        self._faced = bool(self.extra)

    @classmethod
    def listing(
        cls, name: str, doc: str, key: str, item: JsonShape, *, base: type[BaseModel] = _Out
    ) -> JsonShape:
        """A face-only wrapper holding one list of ``item`` under ``key``; dump it with
        ``shape.dump(None, **{key: [item.dump(x) for x in xs]})``."""
        return cls(name, None, doc, (key,), extra={key: JsonExtra(list[item.model])}, base=base)  # type: ignore[name-defined]

    def dump(self, obj: Any, **extra: Any) -> dict[str, Any]:
        """``obj`` as JSON-ready data (datetimes stay ``datetime``; the encoder writes them)."""
        if not self._faced:  # the core's fields only (each hit of a recall): one comprehension
            return {
                name: get(obj) if convert is None else (None if (v := get(obj)) is None else convert(v))
                for name, get, convert in self._plan
            }
        out: dict[str, Any] = {}
        for name, get, convert in self._plan:
            value = extra[name] if name in self.extra and name in extra else get(obj)
            out[name] = value if convert is None or value is None else convert(value)
        return out

    def build(self, obj: Any, **extra: Any) -> BaseModel:
        """``dump`` validated into ``model``, for code that keeps model instances (not a hot path)."""
        return self.model.model_validate(self.dump(obj, **extra))

    def __repr__(self) -> str:
        return f"JsonShape({self.name!r}, {getattr(self.source, '__name__', None)})"


def _extra_getter(name: str, x: JsonExtra) -> Callable[[Any], Any]:
    def missing(_: Any) -> Any:
        if x.default is ...:
            raise TypeError(f"dump() needs the face-only field {name!r}")
        return x.default

    return missing
