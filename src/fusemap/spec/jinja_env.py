"""The sandboxed Jinja2 environment that renders spec files, and its error reporting.

Every failure while rendering becomes a :class:`SpecError` located at ``file:line`` of
the template, so no Jinja (or other) exception escapes to the user.
"""

from __future__ import annotations

import glob
import math
import operator
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, meta, nodes, pass_context
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from fusemap.spec.errors import FusemapError, Location, SpecError

MAX_RENDERED_CHARS = 50_000_000
"""Rendered text larger than this is refused (a runaway loop, or an attack)."""

SAFE_GLOBALS: dict[str, Any] = {
    **{f.__name__: f for f in (abs, min, max, round, sum, len, sorted, enumerate, zip)},
    **{f.__name__: f for f in (int, float, str, bool, list, tuple)},
    **{name: getattr(math, name) for name in ("ceil", "floor", "log", "log2", "log10")},
    **{name: getattr(math, name) for name in ("sqrt", "exp", "prod", "pi")},
}
"""Plain functions templates may call (the corpus uses ``max`` and ``ceil``)."""

_MAX_SEQUENCE_REPEAT = 10_000_000
_MAX_POWER_BITS = 100_000
_UNDEFINED_NAME = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' is undefined$")
_SIMILAR = 0.6
_JINJA_MARKUP = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})")
_MAX_SIMILARITY_WORK = 200_000


class AssertExtension(Extension):
    """``{% assert cond, "message" %}``: a false condition is a SpecError at that line."""

    tags = {"assert"}

    def parse(self, parser: Parser) -> nodes.Node:
        """Parse ``assert cond[, message]`` into a call of :meth:`_check`."""
        lineno = next(parser.stream).lineno
        cond = parser.parse_expression()
        message: nodes.Expr = nodes.Const(None)
        if parser.stream.skip_if("comma"):
            message = parser.parse_expression()
        where = nodes.Const(parser.filename or parser.name or "<template>")
        call = self.call_method("_check", [cond, message, where, nodes.Const(lineno)])
        return nodes.ExprStmt(call, lineno=lineno)

    @staticmethod
    def _check(cond: Any, message: Any, filename: str, lineno: int) -> str:
        if not cond:
            text = "assertion failed" if message is None else f"assertion failed: {message}"
            raise SpecError(text, Location(filename, lineno))
        return ""


class SpecEnvironment(ImmutableSandboxedEnvironment):
    """Sandbox with StrictUndefined, no autoescape and guards against huge values."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self) -> None:
        super().__init__(
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            extensions=[AssertExtension],
        )
        for name in ("lipsum", "cycler", "joiner"):
            self.globals.pop(name, None)
        self.globals.update(SAFE_GLOBALS)

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        """Refuse ``*`` and ``**`` whose result would be absurdly large."""
        if operator_ == "**":
            ints = isinstance(left, int) and isinstance(right, int) and abs(left) > 1
            if ints and right * math.log2(abs(left)) > _MAX_POWER_BITS:
                raise SecurityError(f"{left} ** {right} is too large")
            return operator.pow(left, right)
        for seq, count in ((left, right), (right, left)):
            sized = isinstance(seq, str | list | tuple) and isinstance(count, int)
            if sized and len(seq) * count > _MAX_SEQUENCE_REPEAT:
                raise SecurityError("repeating a sequence that many times is too large")
        return operator.mul(left, right)


class TemplateHost:
    """Reads and renders the files of one load; subclasses parse (``load``) and ``register``.

    The include search path is shared by every file rendered later in the same load.
    """

    def __init__(self) -> None:
        self.env = SpecEnvironment()
        self.search_path: list[str] = []
        self.stack: list[str] = []
        self.files: list[str] = []
        self.referenced: set[str] = set()  # names the templates read (unused -D check)
        # include_text() pastes between markers, so errors in the pasted text point at
        # the included file and line (the random part keeps spec text from posing as one)
        self.paste_token = f"\x00fusemap_paste_{secrets.token_hex(6)}_"
        self.pasted: list[list[tuple[str, int]]] = []  # paste number -> origin of each line

    def load(self, file: str, variables: Mapping[str, Any]) -> Any:
        """Render and parse ``file`` (implemented by the loader)."""
        raise NotImplementedError

    def register(self, docs: list[tuple[str, Any]], keys: str, many: bool) -> str:
        """Store included documents and return their placeholder (implemented by the loader)."""
        raise NotImplementedError

    def read(self, file: str) -> str:
        """The text of ``file``; refuses include cycles."""
        real = os.path.realpath(file)
        if real in self.stack:
            chain = " -> ".join([*self.stack[self.stack.index(real) :], real])
            raise SpecError(f"include cycle: {chain}")
        try:
            with open(file, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise SpecError(f"file not found: {file!r}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError(f"cannot read {file!r}: {e}") from None
        if file not in self.files:
            self.files.append(file)
        return text

    def render_with_origins(
        self, file: str, variables: Mapping[str, Any]
    ) -> tuple[str, list[tuple[str, int]]]:
        """The rendered text of ``file`` and, per rendered line, the (file, line) it came
        from: text pasted by ``include_text`` points into the included file."""
        source, marked = self.render(file, variables)
        text, pasted = self._unmark(marked)
        base = line_map(source, text)
        origins = [(file, line) for line in base]
        for j, origin in pasted.items():
            if j < len(origins):
                origins[j] = origin
        return text, origins

    def _unmark(self, marked: str) -> tuple[str, dict[int, tuple[str, int]]]:
        """Strip the paste markers; map each pasted line to its origin."""
        if self.paste_token not in marked:
            return marked, {}
        token = re.escape(self.paste_token)
        parts = re.split(rf"{token}([BE])(\d+)\x00", marked)
        text, pasted, open_at = parts[0], {}, {}
        for i in range(1, len(parts), 3):
            kind, n = parts[i], int(parts[i + 1])
            if kind == "B":
                line = text.count("\n")
                clean_start = not text[text.rfind("\n") + 1 :].strip()
                open_at[n] = (line, clean_start)
            elif n in open_at and n < len(self.pasted):
                line, clean_start = open_at.pop(n)
                origins = self.pasted[n]
                if text.count("\n") - line + 1 >= len(origins):
                    for k, origin in enumerate(origins):
                        if k > 0 or clean_start:
                            pasted[line + k] = origin
            text += parts[i + 2]
        return text, pasted

    def render(self, file: str, variables: Mapping[str, Any]) -> tuple[str, str]:
        """Return (source text, rendered text) of ``file`` (pasted text still marked)."""
        source = self.read(file)
        self.stack.append(os.path.realpath(file))
        try:
            context = {**variables, **self.template_globals(file)}
            rendered = render_template(self.env, source, file, context)
            self.referenced |= meta.find_undeclared_variables(self.env.parse(source))
        finally:
            self.stack.pop()
        return source, rendered

    def dirs(self, base: str) -> list[str]:
        """Where paths named in ``base`` are looked up: its directory, then the search path."""
        return [os.path.dirname(base) or ".", *self.search_path]

    def find(self, base: str, name: str) -> str | None:
        """The first existing ``name`` in :meth:`dirs`, or None."""
        for d in self.dirs(base):
            candidate = os.path.normpath(os.path.join(d, str(name)))
            if os.path.exists(candidate):
                return candidate
        return None

    def find_file(self, base: str, name: str) -> str:
        """Like :meth:`find` but must be a file, else a SpecError."""
        found = self.find(base, name)
        if found is None or not os.path.isfile(found):
            searched = ", ".join(self.dirs(base))
            raise SpecError(f"file {str(name)!r} not found (searched {searched})")
        return found

    def find_all(self, base: str, pattern: str) -> list[str]:
        """Every match of the glob ``pattern`` in :meth:`dirs`, without duplicates."""
        seen: dict[str, None] = {}
        for d in self.dirs(base):
            for m in sorted(glob.glob(os.path.join(d, str(pattern)), recursive=True)):
                seen.setdefault(os.path.normpath(m), None)
        return list(seen)

    def template_globals(self, file: str) -> dict[str, Any]:
        """The functions a template sees, with paths relative to ``file``."""

        @pass_context
        def include(context: Context, path: str, keys: str = "", **kwargs: Any) -> str:
            target = self.find_file(file, path)
            tree = self.load(target, {**context.get_all(), **kwargs})
            return self.register([(target, tree)], keys, False)

        @pass_context
        def include_all(context: Context, pattern: str, keys: str = "") -> str:
            targets = [f for f in self.find_all(file, pattern) if os.path.isfile(f)]
            docs = [(t, self.load(t, context.get_all())) for t in targets]
            return self.register(docs, keys, True)

        @pass_context
        def include_text(context: Context, path: str) -> str:
            text, origins = self.render_with_origins(self.find_file(file, path), context.get_all())
            n = len(self.pasted)
            self.pasted.append(origins)
            return f"{self.paste_token}B{n}\x00{text}{self.paste_token}E{n}\x00"

        def add_to_path(directory: str) -> str:
            d = os.path.normpath(os.path.join(os.path.dirname(file) or ".", str(directory)))
            if d not in self.search_path:
                self.search_path.append(d)
            return ""

        def find_path(path: str) -> str:
            found = self.find(file, path)
            if found is None:
                raise SpecError(
                    f"path {str(path)!r} not found (searched {', '.join(self.dirs(file))})"
                )
            return os.path.abspath(found)

        def setenv(*args: Any, **kwargs: Any) -> str:
            raise SpecError("setenv is not allowed: a spec may not change the environment")

        return {
            "include": include,
            "include_all": include_all,
            "include_text": include_text,
            "add_to_path": add_to_path,
            "find_path": find_path,
            "find_paths": lambda p: [os.path.abspath(f) for f in self.find_all(file, p)],
            "path_exists": lambda p: self.find(file, p) is not None,
            "cwd": lambda: os.path.abspath(os.path.dirname(file) or "."),
            "setenv": setenv,
        }


def expand_paths(paths: Sequence[str | Path] | str | Path) -> list[str]:
    """Files named by ``paths``: files, globs (sorted) or directories (their *.yaml)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    files: list[str] = []
    for p in paths:
        text = os.path.normpath(str(p))
        if glob.has_magic(text):
            matches = sorted(m for m in glob.glob(text, recursive=True) if os.path.isfile(m))
            if not matches:
                raise SpecError(f"no file matches {str(p)!r}")
            files.extend(os.path.normpath(m) for m in matches)
        elif os.path.isdir(text):
            files.extend(sorted(glob.glob(os.path.join(text, "*.yaml"))))
        elif not os.path.isfile(text):
            raise SpecError(f"file not found: {str(p)!r}")
        else:
            files.append(text)
    return files


def render_template(
    env: SpecEnvironment, source: str, filename: str, variables: Mapping[str, Any]
) -> str:
    """Render ``source`` (the text of ``filename``); every failure is a SpecError."""
    try:
        code = env.compile(source, name=filename, filename=filename)
        template = env.template_class.from_code(env, code, env.make_globals(None), None)
        chunks, size = [], 0
        for chunk in template.generate(dict(variables)):
            size += len(chunk)
            if size > MAX_RENDERED_CHARS:
                raise SpecError(
                    f"rendered text is too large (over {MAX_RENDERED_CHARS} characters)"
                )
            chunks.append(chunk)
        text = "".join(chunks)
    except FusemapError as e:
        if e.location.file is None:
            e.located(Location(filename, _template_line(e, filename)))
        raise
    except TemplateSyntaxError as e:
        raise SpecError(f"Jinja syntax error: {e.message}", Location(filename, e.lineno)) from e
    except SecurityError as e:
        where = Location(filename, _template_line(e, filename))
        raise SpecError(f"unsafe template operation: {e}", where) from e
    except UndefinedError as e:
        where = Location(filename, _template_line(e, filename))
        match = _UNDEFINED_NAME.match(str(e.message or ""))
        if match:
            name = match.group(1)
            message = f"undefined variable '{name}' (pass it with -D {name}=VALUE)"
            raise SpecError(message, Location(where.file, where.line, name)) from e
        raise SpecError(f"undefined value: {e.message}", where) from e
    except RecursionError as e:
        where = Location(filename, _template_line(e, filename))
        raise SpecError("template recursion too deep", where) from e
    except Exception as e:  # any other failure of user template code
        where = Location(filename, _template_line(e, filename))
        raise SpecError(f"template error: {type(e).__name__}: {e}", where) from e
    return text


def _template_line(exc: BaseException, filename: str) -> int | None:
    """The innermost template line of ``filename`` in the (Jinja-rewritten) traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def line_map(source: str, rendered: str) -> list[int]:
    """For each rendered line (0-based index), the 1-based source line it came from."""
    src, out = source.splitlines(), rendered.splitlines()
    if src == out:
        return list(range(1, len(out) + 1))
    result = [1] * len(out)
    opcodes = SequenceMatcher(None, src, out, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for k in range(j2 - j1):
                result[j1 + k] = i1 + k + 1
        elif tag == "insert":
            for j in range(j1, j2):
                result[j] = max(i1, 1)
        elif tag == "replace":
            _map_block(src, out, i1, i2, j1, j2, result)
    return result


def _map_block(
    src: list[str], out: list[str], i1: int, i2: int, j1: int, j2: int, result: list[int]
) -> None:
    """Map each rendered line of a changed block to the source line that produced it.

    In order of preference: a source line whose literal text matches with every
    ``{{ }}``/``{% %}`` as a wildcard (the first one not before the previous pick); the
    most similar source line; else the next source line that outputs an expression (a
    pasted ``include_text``).
    """
    patterns = [_line_pattern(src[i]) for i in range(i1, i2)]
    fuzzy = (i2 - i1) * (j2 - j1) <= _MAX_SIMILARITY_WORK
    current = i1 + 1
    for j in range(j1, j2):
        text = out[j]
        if not text.strip():
            result[j] = current
            continue
        hits = [i1 + k + 1 for k, p in enumerate(patterns) if p and p.fullmatch(text)]
        if hits:
            current = next((h for h in hits if h >= current), hits[0])
        elif fuzzy and (best := _most_similar(src, i1, i2, text)):
            current = best
        else:
            current = next((i + 1 for i in range(current - 1, i2) if "{{" in src[i]), current)
        result[j] = current


def _line_pattern(line: str) -> re.Pattern[str] | None:
    """A regex matching what ``line`` can render to; None if it has no literal text."""
    parts = _JINJA_MARKUP.split(line)
    if not "".join(parts[::2]).strip():
        return None
    return re.compile(".*?".join(re.escape(p) for p in parts[::2]), re.S)


def _most_similar(src: list[str], i1: int, i2: int, text: str) -> int | None:
    best, best_ratio = None, _SIMILAR
    for i in range(i1, i2):
        ratio = SequenceMatcher(None, src[i].strip(), text.strip()).ratio()
        if ratio > best_ratio:
            best, best_ratio = i + 1, ratio
    return best
