"""Reading a manifest: YAML, TOML or JSON, checked, with errors that name the file and line.

A file holds one agent (its fields at the top level) or several (``agents:
[...]`` plus an optional ``default:`` name). Every field is checked by
pydantic with unknown keys refused, and a bad file gives one
:class:`~cortex_kernel.exceptions.ConfigError` naming the file, the field
(with its line for YAML, where the parser knows it) and what is allowed —
never a traceback. YAML aliases that would expand past
:data:`MAX_YAML_VALUES` (an alias bomb) or refer to themselves are refused
before anything walks the data.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, Tag, ValidationError

from ..exceptions import ConfigError
from .agents import AgentManifest, ManifestFile

__all__ = ["MAX_YAML_VALUES", "Manifest", "load_manifest", "validate_manifest"]


@dataclass(frozen=True)
class Manifest:
    """A manifest file as read: its agents, and the file they came from.

    Attributes
    ----------
    path
        The file (as given to :func:`load_manifest`).
    agents
        Its agents, in file order (one for a one-agent file).
    default
        The agent used unless one is chosen (``None``: the first).
    """

    path: Path
    agents: tuple[AgentManifest, ...]
    default: str | None = None

    def names(self) -> list[str]:
        """The agents' names, in file order."""
        return [agent.name for agent in self.agents]

    def agent(self, name: str | None = None) -> AgentManifest:
        """The agent called ``name`` (default: ``default`` or the first one).

        Raises
        ------
        ConfigError
            When no agent has that name; the message lists those that exist.
        """
        wanted = name or self.default
        if wanted is None:
            return self.agents[0]
        for agent in self.agents:
            if agent.name == wanted:
                return agent
        raise ConfigError(
            f"no agent named '{wanted}' in {self.path}; agents: {', '.join(self.names())}"
        )


def _read(path: Path) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """The file's data and, for YAML, the line of every key and item."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text), {}
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise ConfigError(
            f"{path}: unknown manifest format '{path.suffix}'; use .yaml, .yml, .toml or .json"
        )
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[tuple[str | int, ...], int] = {}
        if node is not None:
            # Before anything walks the data: aliases make a tree of shared nodes.
            _check_expansion(path, node)
            _yaml_lines(node, (), lines)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, lines


#: Most values a YAML manifest may hold once its aliases (and ``<<`` merges) are
#: expanded: far above any real manifest, far below an alias bomb's billions.
MAX_YAML_VALUES = 100_000


def _check_expansion(path: Path, root: Any) -> None:
    """Refuse a document whose aliases expand to more than :data:`MAX_YAML_VALUES` values.

    An alias is the anchored node itself, so the composed graph stays small
    while a walk of it (line numbers, validation) visits every repetition: a
    650-byte "billion laughs" file is 10^9 values. Each node's expanded size is
    counted once (memoised), so this check is linear in the file.

    Raises
    ------
    ConfigError
        Naming the line of the first collection that grows past the limit.
    """
    import yaml

    sizes: dict[int, int] = {}
    counting: set[int] = set()  # the ancestors of the node popped
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_counted = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[key] = 1
            continue
        if children_counted:
            counting.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(child), 1) for child in children)
            if sizes[key] > MAX_YAML_VALUES:
                raise ConfigError(
                    f"{path}:{node.start_mark.line + 1}: aliases expand the manifest past "
                    f"{MAX_YAML_VALUES:,} values (an alias bomb?); write the values out instead"
                )
        elif key in counting:  # reached again below itself
            raise ConfigError(
                f"{path}:{node.start_mark.line + 1}: an alias inside this collection refers "
                "to the collection itself (a recursive alias)"
            )
        elif key not in sizes:
            counting.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children)


_Lines = dict[tuple[str | int, ...], int]


def _yaml_lines(node: Any, at: tuple[str | int, ...], lines: _Lines) -> None:
    import yaml

    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = (*at, str(key.value))
            _yaml_lines(value, here, lines)
            lines[here] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _yaml_lines(item, (*at, index), lines)


def _field_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


def _tagged(annotation: Any) -> dict[str, type[BaseModel]]:
    """The members of a tagged union by tag (``{}`` for anything else).

    A member is tagged by ``Tag`` (the tools, the feed sources) or by the
    literal of its ``kind`` field (the relics).
    """
    found: dict[str, type[BaseModel]] = {}

    def visit(item: Any) -> None:
        if get_origin(item) is Annotated:
            base, *meta = get_args(item)
            tags = [m.tag for m in meta if isinstance(m, Tag)]
            if tags and isinstance(base, type) and issubclass(base, BaseModel):
                found[tags[0]] = base
            else:
                visit(base)
        elif isinstance(item, type) and issubclass(item, BaseModel):
            kind = item.model_fields.get("kind")
            if kind is not None and get_origin(kind.annotation) is Literal:
                for value in get_args(kind.annotation):
                    found[str(value)] = item
        else:
            for arg in get_args(item):
                visit(arg)

    visit(annotation)
    return found if len(set(found.values())) > 1 else {}


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _field(model: type[BaseModel], key: str) -> Any:
    return model.model_fields.get(key) or next(
        (f for f in model.model_fields.values() if f.alias == key), None
    )


@dataclass
class _Place:
    """Where an error is: its location as the file writes it, and the model there."""

    loc: tuple[str | int, ...]  # without the tags pydantic inserts
    model: type[BaseModel] | None  # the model of the last part's container
    tag: str | None = None  # the kind of the union member the error is in…
    kinds: dict[str, type[BaseModel]] | None = None  # …and that union's members
    union: str = ""  # the field holding the union (relics, tools, source)
    inner: type[BaseModel] | None = None  # the model the whole location leads to


def _place(model: type[BaseModel], loc: Sequence[str | int]) -> _Place:
    """Walk pydantic's ``loc`` through the models: drop the union tags, find the model."""
    place = _Place((), model)
    current: type[BaseModel] | None = model
    pending: dict[str, type[BaseModel]] = {}
    field = ""
    for part in loc:
        if isinstance(part, int):
            place.loc += (part,)
            continue
        if part in pending:  # the tag of the union member pydantic tried
            current, place.tag, place.kinds, place.union = pending[part], part, pending, field
            pending = {}
            continue
        pending = {}
        place.model = current
        place.loc += (part,)
        info = _field(current, part) if current is not None else None
        if info is None:
            current = None
            continue
        field = part
        pending = _tagged(info.annotation)
        current = None if pending else _inner_model(info.annotation)
    place.inner = current
    return place


def _names(model: type[BaseModel]) -> list[str]:
    return sorted(info.alias or name for name, info in model.model_fields.items())


def _describe(
    path: Path,
    error: Mapping[str, Any],
    model: type[BaseModel],
    lines: Mapping[tuple[str | int, ...], int],
) -> str:
    place = _place(model, tuple(error["loc"]))
    full = place.loc
    line = None
    for cut in range(len(full), -1, -1):
        line = lines.get(full[:cut])
        if line is not None:
            break
    where = f"{path}:{line}" if line is not None else str(path)
    message = str(error["msg"])
    kind, kinds = place.tag, place.kinds or {}
    if error["type"] == "extra_forbidden" and place.model is not None:
        key = str(full[-1])
        own = ", ".join(_names(place.model))
        if kind is not None and any(_field(cls, key) is not None for cls in kinds.values()):
            # Another kind's field: say which kind this entry is.
            message = f"not a field of {kind} {place.union} (theirs: {own})"
        else:
            message = f"unknown field; allowed here: {own}"
    elif error["type"] == "missing" and kind is not None and place.model is kinds.get(kind):
        message = f"a {kind} {place.union.removesuffix('s')} needs '{full[-1]}'"
    elif error["type"] in ("union_tag_not_found", "union_tag_invalid"):
        context = error.get("ctx") or {}
        key = str(context.get("discriminator", "kind")).strip("'")
        known = ", ".join(_tagged_at(model, error["loc"]))
        if error["type"] == "union_tag_not_found":
            message = f"needs '{key}': one of {known}"
        else:
            message = f"unknown {key} {context.get('tag')!r}; one of {known}"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return f"{where}: {_field_path(full)}: {message}"


def _tagged_at(model: type[BaseModel], loc: Sequence[str | int]) -> dict[str, type[BaseModel]]:
    """The members of the tagged union that holds ``loc`` (``relics[0]``: the relic kinds)."""
    fields = [index for index, part in enumerate(loc) if isinstance(part, str)]
    if not fields:
        return {}
    holder = _place(model, loc[: fields[-1]]).inner
    info = _field(holder, str(loc[fields[-1]])) if holder is not None else None
    return _tagged(info.annotation) if info is not None else {}


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest (``.yaml``, ``.yml``, ``.toml`` or ``.json``).

    Returns
    -------
    Manifest
        Its agents (a one-agent file gives a list of one) and its path.

    Raises
    ------
    ConfigError
        Naming the file, the field (and line, for YAML) and what is allowed.
    """
    file = Path(path).expanduser()
    data, lines = _read(file)
    return validate_manifest(data, file, lines)


def validate_manifest(
    data: Any, file: Path, lines: Mapping[tuple[str | int, ...], int] | None = None
) -> Manifest:
    """Validate already-read manifest ``data`` (as :func:`load_manifest` does).

    ``lines`` maps field locations to line numbers, when the format has them.
    """
    lines = lines or {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: a manifest is a mapping of fields, not {type(data).__name__}")
    several = "agents" in data
    model: type[BaseModel] = ManifestFile if several else AgentManifest
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        messages = [_describe(file, e, model, lines) for e in exc.errors(include_url=False)]
        shown = messages[:5]
        more = f"\n(and {len(messages) - 5} more)" if len(messages) > 5 else ""
        raise ConfigError("invalid manifest: " + "\n".join(shown) + more) from None
    if isinstance(parsed, ManifestFile):
        return Manifest(file, tuple(parsed.agents), parsed.default)
    assert isinstance(parsed, AgentManifest)
    return Manifest(file, (parsed,))
