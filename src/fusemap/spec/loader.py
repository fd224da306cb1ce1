"""Load spec files: Jinja2 rendering, safe YAML parsing, includes and merge keys.

Data shape: plain dicts (insertion-ordered), lists, str (:class:`QuotedStr` when quoted
in YAML), int, float, bool and None. A mapping tagged ``!Name`` gets ``"type": "Name"``
as its first key. ``!nomerge`` containers are :class:`NoMergeDict` / :class:`NoMergeList`.
Nothing is ever constructed from a YAML tag.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fusemap.spec import limits
from fusemap.spec.errors import FusemapError, Location, SourceMap, SpecError
from fusemap.spec.jinja_env import TemplateHost, expand_paths
from fusemap.spec.values import QuotedStr
from fusemap.spec.yaml_read import CORE, check_size, compose, implicit_tag, plain_scalar

log = logging.getLogger("fusemap")

_NAME_TAG = re.compile(r"^![A-Z][A-Za-z0-9_]*$")
_DEFINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$", re.S)
Loc = tuple[str, int]


class NoMergeList(list):
    """A list tagged ``!nomerge``: a recursive merge (``<<<``) never merges into it."""


class NoMergeDict(dict):
    """A mapping tagged ``!nomerge``: a recursive merge (``<<<``) never merges into it."""


@dataclass
class LoadedSpec:
    """The combined top-level data of all files, where each value came from, and the files read."""

    data: dict[str, Any]
    sources: SourceMap
    files: list[str] = field(default_factory=list)
    anchor_holders: set[str] = field(default_factory=set)
    """Top-level keys whose value defines a YAML anchor (``key: &name ...``).

    Pasted helper text (``include_text``) uses such keys only to hold anchors for later
    aliases; the spec ignores them when they are not spec keys.
    """
    referenced: set[str] = field(default_factory=set)
    """Names the templates read (a variable none reads has no effect)."""


class _Map:
    """A mapping under construction: values plus the (file, line) of each key."""

    __slots__ = ("items", "lines", "nomerge")

    def __init__(self, nomerge: bool = False) -> None:
        self.items: dict[str, Any] = {}
        self.lines: dict[str, Loc] = {}
        self.nomerge = nomerge


class _Seq:
    """A list under construction: items plus the (file, line) of each item."""

    __slots__ = ("items", "lines", "nomerge")

    def __init__(self, nomerge: bool = False) -> None:
        self.items: list[Any] = []
        self.lines: list[Loc] = []
        self.nomerge = nomerge


class _Included(NamedTuple):
    """Documents loaded by ``include()``/``include_all()``, waiting for their placeholder."""

    docs: list[tuple[str, Any]]  # (file, tree)
    keys: tuple[str, ...]
    many: bool


def load_files(
    paths: Sequence[str | Path], variables: Mapping[str, Any] | None = None
) -> LoadedSpec:
    """Render, parse and combine spec files; the first file defining a top-level key wins."""
    session = _Session(dict(variables or {}))
    combined, sources = _Map(), SourceMap()
    owner: dict[str, str] = {}  # top-level key -> the file that gave it
    try:
        for file in expand_paths(paths):
            tree = session.load(file, session.variables, top=True)
            for key, value in tree.items.items():
                if key in combined.items:
                    log.info("%s: top-level key '%s' ignored (given in %s)", file, key, owner[key])
                    continue
                combined.items[key], combined.lines[key], owner[key] = value, tree.lines[key], file
        data = _finish(combined, (), sources)
    except RecursionError:
        raise SpecError("spec nested too deeply") from None
    holders = {k for k, f in owner.items() if (f, k) in session.anchor_holders}
    return LoadedSpec(data, sources, session.files, holders, session.referenced)


def parse_define(text: str) -> tuple[str, Any]:
    """Parse a CLI ``-D NAME=VALUE``; VALUE reads as a YAML scalar (``3``, ``1e9``,
    ``true``) or a flat list of them (``[16, 32, 16]``)."""
    match = _DEFINE.match(text)
    if not match:
        raise SpecError(f"bad definition {text!r}: expected NAME=VALUE with NAME an identifier")
    name, raw = match.group(1), match.group(2).strip()
    if raw.startswith("[") and raw.endswith("]"):
        items = raw[1:-1].strip()
        if any(c in items for c in "[]{}"):
            raise SpecError(f"bad definition {text!r}: a list of scalars only (no nesting)")
        return name, [_define_scalar(x.strip()) for x in items.split(",")] if items else []
    return name, _define_scalar(raw)


def _define_scalar(raw: str) -> Any:
    """One scalar of a ``-D`` value: quoted (a string as written) or read as YAML."""
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return QuotedStr(raw[1:-1])
    if raw == "":
        return ""
    return plain_scalar(raw, implicit_tag(raw))


class _Session(TemplateHost):
    """State shared by all files of one load: search path, include registry, counters."""

    def __init__(self, variables: dict[str, Any]) -> None:
        super().__init__()
        self.variables = variables
        self.registry: dict[str, _Included] = {}
        self.nodes = self.parsed = 0
        # Placeholders carry a random part, so no text of a spec can pose as one.
        self.token = f"__fusemap_include_{secrets.token_hex(8)}_"
        self.placeholder = re.compile(rf"^({re.escape(self.token)}\d+__)((?:\.[^.]+)*)$")
        self.anchor_holders: set[tuple[str, str]] = set()  # (file, top-level key)

    def load(self, file: str, variables: Mapping[str, Any], top: bool = False) -> Any:
        """Render and parse ``file``; returns its tree with placeholders and merges done."""
        rendered, origins = self.render_with_origins(file, variables)
        self.stack.append(os.path.realpath(file))
        try:
            tree = _Converter(self, file, origins).document(rendered, top)
        finally:
            self.stack.pop()
        self.env.tick()  # YAML parsing counts against the render time too
        return tree

    def register(self, docs: list[tuple[str, Any]], keys: str, many: bool) -> str:
        """Remember included documents; the returned token stands for them in YAML."""
        token = f"{self.token}{len(self.registry)}__"
        parts = tuple(k for k in str(keys).split(".") if k) if keys else ()
        self.registry[token] = _Included(docs, parts, many)
        return token

    def composed(self) -> None:
        """One more YAML node parsed (aliases not expanded yet: see :meth:`count`)."""
        self.parsed += 1
        if self.parsed > limits.current().yaml_nodes:
            raise SpecError(limits.exceeded("yaml_nodes", "document too large"))

    def count(self, n: int = 1) -> None:
        self.nodes += n
        if self.nodes > limits.current().yaml_nodes:
            raise SpecError(limits.exceeded("yaml_nodes", "document too large (alias expansion?)"))


class _Converter:
    """Turns one rendered file's YAML node graph into a ``_Map``/``_Seq`` tree."""

    def __init__(self, session: _Session, file: str, origins: list[Loc]) -> None:
        self.session, self.file, self.origins = session, file, origins
        self.active: set[int] = set()

    def origin(self, index: int) -> Loc:
        """(file, 1-based line) of 0-based rendered line ``index`` (pasted: its file)."""
        if not self.origins:
            return self.file, index + 1
        return self.origins[min(index, len(self.origins) - 1)]

    def loc(self, node: Node) -> Loc:
        return self.origin(node.start_mark.line)

    def document(self, text: str, top: bool) -> Any:
        try:
            root = compose(text, self.session)
        except MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            where = Location(*self.origin(mark.line)) if mark else Location(self.file)
            problem = e.problem or e.context or "invalid YAML"
            if e.problem and e.context and e.context_mark:
                problem += f" ({e.context} started on line {self.origin(e.context_mark.line)[1]})"
            raise SpecError(f"YAML syntax error: {problem}", where) from None
        except RecursionError:
            raise SpecError("document nested too deeply", Location(self.file)) from None
        except YAMLError as e:
            raise SpecError(f"YAML syntax error: {e}", Location(self.file)) from None
        except FusemapError as e:  # a limit reached while parsing
            raise e.located(Location(self.file)) from None
        if root is None:
            return _Map() if top else None
        if top and isinstance(root, MappingNode):
            for key_node, value_node in root.value:
                # ``key: &anchor value`` defines the anchor here (an alias would point
                # back to a node written earlier in the text).
                defined_here = value_node.start_mark.index > key_node.start_mark.index
                if getattr(value_node, "anchor", None) and defined_here:
                    self.session.anchor_holders.add((self.file, str(key_node.value)))
        try:
            check_size(root, self.session.nodes)
            tree = self.convert(root)
            _merges(tree)
        except RecursionError:
            raise SpecError("document nested too deeply", Location(self.file)) from None
        except FusemapError as e:  # e.g. "document too large": at least name the file
            e.located(Location(self.file))
            raise
        if top and not isinstance(tree, _Map):
            kind = "a list" if isinstance(tree, _Seq) else f"{tree!r}"
            where = Location(*self.loc(root))
            raise SpecError(f"the top level of a spec file must be a mapping, got {kind}", where)
        return tree

    def convert(self, node: Node) -> Any:
        self.session.count()
        explicit = node.ctag is not None and node.ctag.handle is not None
        tag = _show_tag(node) if explicit else ""
        if isinstance(node, ScalarNode):
            return self.scalar(node, tag)
        if id(node) in self.active:
            raise SpecError("recursive alias", Location(*self.loc(node)))
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self.mapping(node, tag)
            assert isinstance(node, SequenceNode)  # ruamel's third kind of node
            return self.sequence(node, tag)
        finally:
            self.active.discard(id(node))

    def mapping(self, node: MappingNode, tag: str) -> _Map:
        if tag and tag not in ("!nomerge", "!!map") and not _NAME_TAG.match(tag):
            self.bad_tag(node, tag)
        out = _Map(nomerge=tag == "!nomerge")
        if _NAME_TAG.match(tag):
            out.items["type"], out.lines["type"] = tag[1:], self.loc(node)
        for key_node, value_node in node.value:
            key, where = self.key(key_node), self.loc(key_node)
            if key in out.items:
                if key == "type" and _NAME_TAG.match(tag):
                    raise SpecError(f"mapping tagged {tag} also has a 'type' key", Location(*where))
                first = out.lines[key][1]
                msg = f"duplicate key '{key}' (first given on line {first})"
                raise SpecError(msg, Location(*where))
            out.items[key], out.lines[key] = self.convert(value_node), where
        return out

    def sequence(self, node: SequenceNode, tag: str) -> _Seq:
        if tag and tag not in ("!nomerge", "!!seq"):
            if _NAME_TAG.match(tag):
                raise SpecError(f"a list cannot be tagged {tag}", Location(*self.loc(node)))
            self.bad_tag(node, tag)
        out = _Seq(nomerge=tag == "!nomerge")
        for item in node.value:
            out.items.append(self.convert(item))
            out.lines.append(self.loc(item))
        return out

    def key(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise SpecError("mapping keys must be plain values", Location(*self.loc(node)))
        if node.ctag is not None and node.ctag.handle is not None:
            self.bad_tag(node, _show_tag(node))
        if self.session.token in node.value:
            raise SpecError("an include() placeholder cannot be a key", Location(*self.loc(node)))
        if node.style in ("'", '"'):
            return QuotedStr(node.value)  # a quoted '<<' is a key, not a merge
        return str(node.value)

    def scalar(self, node: ScalarNode, tag: str) -> Any:
        text, where = node.value, self.loc(node)
        if tag in ("!include", "!includedir"):
            return self.include_tag(text, tag, where)
        if _NAME_TAG.match(tag):
            if text.strip():
                raise SpecError(f"{tag} must tag a mapping, not {text!r}", Location(*where))
            out = _Map()
            out.items["type"], out.lines["type"] = tag[1:], where
            return out
        if tag:
            return self.core_tagged(node, tag)
        if node.style in ("'", '"'):
            value: Any = QuotedStr(text)
        elif node.style is None:
            value = plain_scalar(text, node.tag)
        else:
            value = str(text).replace("\a", "")  # ruamel marks folds with BEL
        if isinstance(value, str) and self.session.token in value:
            return self.placeholder(value, where)
        return value

    def core_tagged(self, node: ScalarNode, tag: str) -> Any:
        kind = tag[2:] if tag.startswith("!!") else ""
        if kind == "str":
            return QuotedStr(node.value)
        if kind in ("int", "float", "bool", "null"):
            value = plain_scalar(node.value, CORE + kind)
            if kind == "null" or not isinstance(value, str):
                return value
            msg = f"{node.value!r} is not a valid {tag}"
            raise SpecError(msg, Location(*self.loc(node)))
        self.bad_tag(node, tag)

    def bad_tag(self, node: Node, tag: str) -> None:
        raise SpecError(f"unsupported YAML tag '{tag}'", Location(*self.loc(node)))

    def include_tag(self, text: str, tag: str, where: Loc) -> Any:
        try:
            if tag == "!include":
                target = self.session.find_file(self.file, text)
                return self.session.load(target, self.session.variables)
            base = os.path.join(os.path.dirname(self.file) or ".", text)
            out = _Seq()
            for f in sorted(glob.glob(os.path.join(base, "*.yaml"))):
                out.items.append(self.session.load(os.path.normpath(f), self.session.variables))
                out.lines.append((os.path.normpath(f), 1))
            return out
        except FusemapError as e:
            raise e.located(Location(*where)) from None

    def placeholder(self, text: str, where: Loc) -> Any:
        match = self.session.placeholder.match(text)
        entry = self.session.registry.get(match.group(1)) if match else None
        if match is None or entry is None:
            msg = f"an include() result must be a whole value (optionally followed by .key), got {text!r}"
            raise SpecError(msg, Location(*where))
        keys = entry.keys + tuple(k for k in match.group(2).split(".") if k)
        picked = [self.pick(file, tree, keys, where) for file, tree in entry.docs]
        if not entry.many:
            return picked[0]
        out = _Seq()
        for (file, _), value in zip(entry.docs, picked, strict=True):
            out.items.append(value)
            out.lines.append((file, 1))
        return out

    def pick(self, file: str, tree: Any, keys: tuple[str, ...], where: Loc) -> Any:
        node = tree
        for depth, key in enumerate(keys):
            at = ".".join(keys[:depth]) or "the top level"
            if isinstance(node, _Map) and key in node.items:
                node = node.items[key]
            elif isinstance(node, _Seq) and (index := _index(key, len(node.items))) is not None:
                node = node.items[index]
            else:
                if isinstance(node, _Map):
                    hint = f"keys there: {', '.join(node.items) or '(none)'}"
                else:
                    hint = f"{at} is {'a list' if isinstance(node, _Seq) else 'not a mapping'}"
                msg = f"include of {file}: no key '{key}' under {at}; {hint}"
                raise SpecError(msg, Location(*where))
        return _copy(node, self.session)


def _index(key: str, length: int) -> int | None:
    if re.fullmatch(r"-?[0-9]+", key) and -length <= int(key) < length:
        return int(key)
    return None


def _show_tag(node: Node) -> str:
    return f"{node.ctag.handle or ''}{node.ctag.suffix}"


def _copy(value: Any, session: _Session) -> Any:
    """Deep copy of a tree (each placeholder gets its own objects to merge into)."""
    session.count()
    if isinstance(value, _Map):
        out = _Map(value.nomerge)
        out.items = {k: _copy(v, session) for k, v in value.items.items()}
        out.lines = dict(value.lines)
        return out
    if isinstance(value, _Seq):
        seq = _Seq(value.nomerge)
        seq.items = [_copy(v, session) for v in value.items]
        seq.lines = list(value.lines)
        return seq
    return value


def _merges(tree: Any) -> None:
    """Apply ``<<`` (shallow) and ``<<<`` (recursive) merge keys, innermost first."""
    if isinstance(tree, _Seq):
        for item in tree.items:
            _merges(item)
        return
    if not isinstance(tree, _Map):
        return
    for value in tree.items.values():
        _merges(value)
    present = [k for k in tree.items if k in ("<<", "<<<") and not isinstance(k, QuotedStr)]
    if len(present) > 1:
        where = Location(*tree.lines["<<<"])
        raise SpecError("at most one '<<' or '<<<' merge key per mapping", where)
    if not present:
        return
    key = present[0]
    sources = _merge_sources(tree.items[key], key, tree.lines[key])
    if key == "<<":
        items, lines = {}, {}
        for k, v in tree.items.items():
            if k != "<<":
                items[k], lines[k] = v, tree.lines[k]
                continue
            for src in sources:
                for sk, sv in src.items.items():
                    if sk not in tree.items and sk not in items:
                        items[sk], lines[sk] = sv, src.lines[sk]
        tree.items, tree.lines = items, lines
    else:
        del tree.items["<<<"], tree.lines["<<<"]
        for src in sources:
            _deep_merge(tree, src)


def _merge_sources(value: Any, key: str, where: Loc) -> list[_Map]:
    sources = value.items if isinstance(value, _Seq) else [value]
    if not sources or not all(isinstance(s, _Map) for s in sources):
        raise SpecError(f"'{key}' needs a mapping or a list of mappings", Location(*where))
    return sources


def _deep_merge(dst: _Map, src: _Map) -> None:
    for key, value in src.items.items():
        if key not in dst.items:
            dst.items[key], dst.lines[key] = value, src.lines[key]
            continue
        old = dst.items[key]
        if old.__class__ is value.__class__ and isinstance(old, _Map | _Seq):
            if old.nomerge or value.nomerge:
                continue
            if isinstance(old, _Map):
                _deep_merge(old, value)
            else:
                old.items.extend(value.items)
                old.lines.extend(value.lines)


def _finish(value: Any, path: tuple[str | int, ...], sources: SourceMap) -> Any:
    """Turn the tree into plain Python data, recording every key and item in ``sources``."""
    if isinstance(value, _Map):
        out: dict[str, Any] = NoMergeDict() if value.nomerge else {}
        for key, item in value.items.items():
            sources.add((*path, key), *value.lines[key])
            out[key] = _finish(item, (*path, key), sources)
        return out
    if isinstance(value, _Seq):
        seq: list[Any] = NoMergeList() if value.nomerge else []
        for i, item in enumerate(value.items):
            sources.add((*path, i), *value.lines[i])
            seq.append(_finish(item, (*path, i), sources))
        return seq
    return value
