"""Base class of spec objects and translation of validation errors to located messages."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from .errors import Location, SourceMap, SpecError, describe_path


def _expression_value(value: Any) -> Any:
    """Accept a literal number, bool or string (an expression); keep it as written."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"expected a number or an expression, got {_show(value)}")


Expr = Annotated[Any, BeforeValidator(_expression_value)]
"""A field that evaluates to a value: a literal, or an expression string (see §1.1)."""


def node_tag(value: Any) -> str | None:
    """The YAML tag (``type``) of a tagged node, as data or as an object."""
    if isinstance(value, dict):
        return value.get("type")
    return getattr(value, "type", None)


class SpecModel(BaseModel):
    """Validated spec object: unknown keys are errors, every field documents itself."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=False,
        arbitrary_types_allowed=True,
        populate_by_name=True,
    )

    def to_data(self) -> Any:
        """Plain data as it would be written in YAML (defaults omitted)."""
        return self.model_dump(mode="python", exclude_defaults=True, by_alias=True)


M = TypeVar("M", bound=BaseModel)


class PathValueError(ValueError):
    """A validation failure about a part of the object, e.g. ``("nodes", 3)``.

    Raise it from a validator so the error points at that part, not the whole object.
    """

    def __init__(self, message: str, path: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.path = path


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else type(value).__name__
    if isinstance(value, (int, float, bool)):
        text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def _field_names(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model reached by ``loc`` (for did-you-mean)."""
    cls: Any = model
    for step in loc:
        if isinstance(step, int) or cls is None:
            continue
        fields = getattr(cls, "model_fields", None)
        if fields and step in fields:
            cls = _inner_model(fields[step].annotation)
        else:
            cls = _model_named(step) or None
    fields = getattr(cls, "model_fields", None)
    return list(fields) if fields else []


_REGISTRY: dict[str, type[BaseModel]] = {}


def register(cls: type[M]) -> type[M]:
    """Record a tagged model class so error messages can name its fields."""
    _REGISTRY[cls.__name__] = cls
    return cls


def _model_named(name: Any) -> type[BaseModel] | None:
    return _REGISTRY.get(name) if isinstance(name, str) else None


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _data_path(data: Any, loc: tuple) -> tuple:
    """Drop the steps pydantic adds for union members (tag names) from ``loc``."""
    path, node = [], data
    for step in loc:
        if (
            isinstance(node, dict)
            and step in node
            or isinstance(node, list)
            and isinstance(step, int)
            and step < len(node)
        ):
            path.append(step)
            node = node[step]
        elif isinstance(node, dict) and isinstance(step, str) and node.get("type") == step:
            continue  # discriminated-union member name
        elif isinstance(node, dict):
            path.append(step)  # missing or extra key: keep it for the message
            node = None
        else:
            continue
    return tuple(path)


_UNMODELLED = {
    "Network": "on-chip networks with hop actions",
    "Array": "physical arrays of distributed buffers",
    "Hierarchical": "nested hierarchies",
}
"""Arch node types of the format that fusemap knows and does not model (work in progress
in the reference tool too): a clear error instead of 'unknown node type'."""


def _message(err: ErrorDetails, model: type[BaseModel], loc: tuple) -> tuple[str, bool]:
    """One readable sentence for a pydantic error; flag whether the key itself is named."""
    kind, value = err["type"], err.get("input")
    field = loc[-1] if loc else None
    if kind == "extra_forbidden":
        names = _field_names(model, loc[:-1])
        close = difflib.get_close_matches(str(field), names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown key '{field}'{hint}", True
    if kind == "missing":
        return f"missing required field '{field}'", True
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx = err.get("ctx", {})
        tag = ctx.get("tag") or (value.get("type") if isinstance(value, dict) else None)
        expected = ctx.get("expected_tags", "")
        if tag is None:
            return f"a tagged node is needed here (one of {expected})", False
        if tag in _UNMODELLED:
            return f"'!{tag}' nodes ({_UNMODELLED[tag]}) are not modelled by fusemap", False
        return f"unknown node type '!{tag}' (expected one of {expected})", False
    expected = {
        "int_type": "an integer",
        "int_parsing": "an integer",
        "int_from_float": "an integer",
        "float_type": "a number",
        "float_parsing": "a number",
        "bool_type": "true or false",
        "bool_parsing": "true or false",
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
    }.get(kind)
    if expected:
        return f"expected {expected}, got {_show(value)}", False
    msg = err.get("msg", kind)
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return msg, False


def validate(
    model: type[M], data: Any, sources: SourceMap | None = None, root: tuple = (), root_data=None
) -> M:
    """Build ``model`` from plain data; the first problem becomes a located SpecError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # Prefer errors that name a concrete key over union noise.
        # A misspelled key is both unknown and missing: name the unknown one.
        errors.sort(
            key=lambda e: (
                e["type"].startswith("union"),
                -len(e["loc"]),
                e["type"] != "extra_forbidden",
            )
        )
        err = errors[0]
        loc = tuple(err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, PathValueError):
            loc += cause.path
        path = root + _data_path(data, loc)
        message, _ = _message(err, model, loc)
        sources = sources or SourceMap()
        file, line = sources.lookup(path)
        key = describe_path(path, root_data if root_data is not None else data)
        raise SpecError(message, Location(file, line, key)) from None


def sequence_of(value: Any) -> list:
    """Flatten nested lists (the corpus nests Einsum lists inside lists)."""
    out: list = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, list):
            out.extend(sequence_of(item))
        else:
            out.append(item)
    return out
