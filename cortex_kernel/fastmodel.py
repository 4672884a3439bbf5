"""Building frozen pydantic models without validating them, for the hot path.

Validation is most of the cost of a small ``feed`` (docs/protocol.md#streaming-guarantees), and
the parser only ever builds actions from values it has just checked itself
(a ``str``, a tuple of ids, an enum member…). These constructors fill the
model's ``__dict__`` and pydantic's three slots directly; the result equals
the validated model, serialises the same, and supports ``model_copy``.
``model_construct`` would do the same, but several times slower.

Never use them for values that were not checked: nothing here validates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = [
    "build",
    "constructor",
    "new",
    "set_dict",
    "set_extra",
    "set_fields_set",
    "set_private",
]

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__
_SLOTS = BaseModel.__dict__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


def constructor(cls: type[M]) -> Callable[..., M]:
    """A keyword-only constructor for ``cls`` that skips validation.

    Fields not given take their default (a fresh one for default factories).
    """
    template: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            template[name] = None
            factories.append((name, field.default_factory))  # type: ignore[arg-type]
        elif not field.is_required():
            template[name] = field.default
        else:
            template[name] = None

    def make(**values: Any) -> M:
        data = template.copy()
        data.update(values)
        for name, factory in factories:
            if name not in values:
                data[name] = factory()
        model = _new(cls)
        _set(model, "__dict__", data)
        _set_fields_set(model, set(values))
        _set_extra(model, None)
        _set_private(model, None)
        return model

    return make


# The four slot setters of a model, for constructors inlined in hot loops:
# ``m = new(cls); set_dict(m, data); set_fields_set(m, names);
# set_extra(m, None); set_private(m, None)``.
new = _new
set_dict = _SLOTS["__dict__"].__set__
set_fields_set = _set_fields_set
set_extra = _set_extra
set_private = _set_private


def build(cls: type[M], data: dict[str, Any], fields_set: set[str]) -> M:
    """A model of ``cls`` whose ``__dict__`` is ``data`` (every field, checked).

    ``fields_set`` may be shared between models: pydantic copies it before
    it changes it (``model_copy``), and frozen models never change it.
    """
    model = _new(cls)
    set_dict(model, data)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model
