"""Rendering spec files with Jinja: the host of one load, its path functions, and where
each rendered line came from.

Every failure while rendering becomes a :class:`SpecError` located at ``file:line`` of
the template, so no Jinja (or other) exception escapes to the user. The sandbox itself
(what a template may touch, and the bounds on its work) is :mod:`.jinja_sandbox`.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import secrets
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import meta, pass_context
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError
from jinja2.runtime import Context

from . import limits
from .errors import FusemapError, Location, SpecError
from .jinja_sandbox import SpecEnvironment, Trace, safe

_UNDEFINED_NAME = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' is undefined$")
_SYSTEM_DIRS = ("/proc", "/sys", "/dev")
"""Kernel views (the process environment in /proc/self/environ, devices): never read."""
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")
"""What YAML counts as a line break."""


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
        self.rendered = 0

    def load(self, file: str, variables: Mapping[str, Any]) -> Any:
        """Render and parse ``file`` (implemented by the loader)."""
        raise NotImplementedError

    def register(self, docs: list[tuple[str, Any]], keys: str, many: bool) -> str:
        """Store included documents and return their placeholder (implemented by the loader)."""
        raise NotImplementedError

    def read(self, file: str) -> str:
        """The text of ``file``; refuses include cycles, special files and huge files."""
        real = os.path.realpath(file)
        if real in self.stack:
            chain = " -> ".join([*self.stack[self.stack.index(real) :], real])
            raise SpecError(f"include cycle: {chain}")
        chars = limits.current().render_chars
        if any(real == d or real.startswith(d + os.sep) for d in _SYSTEM_DIRS):
            raise SpecError(f"cannot read {file!r}: a spec may not read system files ({real})")
        try:
            if not os.path.isfile(real):
                raise SpecError(f"not a regular file: {file!r}")
            with open(file, encoding="utf-8") as f:
                text = f.read(chars + 1)
        except FileNotFoundError:
            raise SpecError(f"file not found: {file!r}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError(f"cannot read {file!r}: {e}") from None
        if len(text) > chars:
            raise SpecError(limits.exceeded("render_chars", f"file {file!r} is too large"))
        if file not in self.files:
            self.files.append(file)
        return text

    def render_with_origins(
        self, file: str, variables: Mapping[str, Any]
    ) -> tuple[str, list[tuple[str, int]]]:
        """The rendered text of ``file`` and, per rendered line, the (file, line) it came
        from: text pasted by ``include_text`` points into the included file."""
        marked, lines = self.render(file, variables)
        text, pasted = self._unmark(marked)  # markers hold no line break: same lines
        origins = [(file, line) for line in lines]
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

    def render(self, file: str, variables: Mapping[str, Any]) -> tuple[str, list[int]]:
        """The rendered text of ``file`` (pasted text still marked), and the source line
        of each rendered line."""
        self.rendered += 1
        if self.rendered > limits.current().includes:
            raise SpecError(limits.exceeded("includes", "too many files rendered"))
        source = self.read(file)
        self.stack.append(os.path.realpath(file))
        try:
            context = {**variables, **self.template_globals(file)}
            rendered = render_template(self.env, source, file, context)
            self.referenced |= meta.find_undeclared_variables(self.env.parse(source))
            return rendered
        finally:
            self.stack.pop()

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
        """Every match of the glob ``pattern`` in :meth:`dirs`, without duplicates; the
        search looks at most at ``find_entries`` directory entries."""
        seen: dict[str, None] = {}
        budget = [limits.current().find_entries]
        for d in self.dirs(base):
            full = os.path.join(d, str(pattern))
            for m in sorted(bounded_glob(full, budget, self.env.clock)):
                seen.setdefault(os.path.normpath(m), None)
                if len(seen) > limits.current().find_matches:
                    raise SpecError(
                        limits.exceeded("find_matches", f"too many paths match {str(pattern)!r}")
                    )
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

        def find_paths(pattern: str) -> list[str]:
            return [os.path.abspath(f) for f in self.find_all(file, pattern)]

        def path_exists(path: str) -> bool:
            return self.find(file, path) is not None

        def cwd() -> str:
            return os.path.abspath(os.path.dirname(file) or ".")

        def setenv(*args: Any, **kwargs: Any) -> str:
            raise SpecError("setenv is not allowed: a spec may not change the environment")

        functions: tuple[Callable[..., Any], ...]
        functions = (include, include_all, include_text, add_to_path, find_path, find_paths)
        functions += (path_exists, cwd, setenv)
        return {f.__name__: safe(f) for f in functions}


def bounded_glob(pattern: str, budget: list[int], clock: limits.Clock) -> Iterator[str]:
    """Paths matching ``pattern`` (``glob`` rules, ``**`` included), looking at no more
    than ``budget[0]`` directory entries (then a SpecError naming ``find_entries``)."""
    anchor, rest = _split_anchor(pattern)
    parts = [p for p in rest.split(os.sep) if p not in ("", ".")]
    yield from _match(anchor, parts, budget, clock)


def _split_anchor(pattern: str) -> tuple[str, str]:
    """The longest leading part of ``pattern`` without wildcards, and the rest."""
    parts = pattern.split(os.sep)
    i = 0
    while i < len(parts) and not glob.has_magic(parts[i]):
        i += 1
    anchor = os.sep.join(parts[:i]) or ("" if not pattern.startswith(os.sep) else os.sep)
    if pattern.startswith(os.sep) and not anchor.startswith(os.sep):
        anchor = os.sep + anchor
    return anchor, os.sep.join(parts[i:])


def _entries(directory: str, budget: list[int], clock: limits.Clock) -> list[os.DirEntry]:
    try:
        with os.scandir(directory or ".") as it:
            out = []
            for entry in it:
                budget[0] -= 1
                if budget[0] < 0:
                    raise SpecError(
                        limits.exceeded("find_entries", "a path search looks at too many files")
                    )
                clock.tick()
                out.append(entry)
            return out
    except OSError:
        return []


def _match(base: str, parts: list[str], budget: list[int], clock: limits.Clock) -> Iterator[str]:
    if not parts:
        if base and os.path.lexists(base):
            yield base
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        yield from _match(base, rest, budget, clock)
        for entry in _entries(base, budget, clock):
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                yield from _match(os.path.join(base, entry.name), parts, budget, clock)
        return
    if not glob.has_magic(head):
        yield from _match(os.path.join(base, head), rest, budget, clock)
        return
    hidden = head.startswith(".")
    for entry in _entries(base, budget, clock):
        if (hidden or not entry.name.startswith(".")) and fnmatch.fnmatchcase(entry.name, head):
            if rest and not entry.is_dir():
                continue
            yield from _match(os.path.join(base, entry.name), rest, budget, clock)


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
) -> tuple[str, list[int]]:
    """Render ``source`` (the text of ``filename``): the text, and for each rendered line
    (0-based) the 1-based source line it came from. Every failure is a SpecError."""
    try:
        tree = env.instrument(env.parse(source, name=filename, filename=filename))
        code = env.compile(tree, name=filename, filename=filename)
        template = env.template_class.from_code(env, code, env.make_globals(None), None)
        return _traced_render(env, template, filename, variables)
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
    except MemoryError as e:
        where = Location(filename, _template_line(e, filename))
        raise SpecError("template needs too much memory", where) from e
    except Exception as e:  # any other failure of user template code
        where = Location(filename, _template_line(e, filename))
        raise SpecError(f"template error: {type(e).__name__}: {e}", where) from e


def _traced_render(
    env: SpecEnvironment, template: Any, filename: str, variables: Mapping[str, Any]
) -> tuple[str, list[int]]:
    """Run the template, noting for every chunk it prints the source line it starts on.

    A literal chunk (template text) knows its line and advances it at every line break;
    the lines of an expression's output (an ``include_text``, a macro) all map to the
    line of the expression (found from the generator's frame, only when needed)."""
    chars = limits.current().render_chars
    trace = Trace()
    env.traces.append(trace)
    chunks: list[str] = []
    lines: list[int] = []
    size, at_start, last = 0, True, 1
    where = _FrameLines(template, filename)
    gen = template.root_render_func(template.new_context(dict(variables)))
    try:
        for chunk in gen:
            env.tick()
            literal = trace.text is not None and chunk is trace.text
            trace.text, known = None, trace.line
            if not chunk:
                continue
            size += len(chunk)
            if size > chars:
                raise SpecError(limits.exceeded("render_chars", "rendered text is too large"))
            chunks.append(chunk)
            if not (literal or at_start or _LINE_BREAK.search(chunk)):
                continue  # an expression's output in the middle of a line
            line = known if literal else where.line(gen, last)
            for k, part in enumerate(_LINE_BREAK.split(chunk)):
                if k:
                    if at_start:
                        lines.append(line)  # an empty rendered line
                    at_start = True
                    line += literal
                if part and at_start:
                    lines.append(line)
                    at_start = False
            last = line
    except Exception:
        env.handle_exception()
    finally:
        env.traces.pop()
    return "".join(chunks), lines


class _FrameLines:
    """The template line a suspended render generator is at, in constant time (a
    frame's ``f_lineno`` scans the code's line table: quadratic over a large template)."""

    def __init__(self, template: Any, filename: str) -> None:
        debug = sorted((code, line) for line, code in template.debug_info)
        self.code_lines = [c for c, _ in debug]
        self.template_lines = [t for _, t in debug]
        self.filename = filename
        self.tables: dict[Any, tuple[list[int], list[int]]] = {}

    def line(self, gen: Any, default: int) -> int:
        """The template line of the innermost generator that just printed."""
        while getattr(gen, "gi_yieldfrom", None) is not None:
            inner = gen.gi_yieldfrom
            if getattr(inner, "gi_frame", None) is None:
                break
            gen = inner
        frame = getattr(gen, "gi_frame", None)
        if frame is None or frame.f_code.co_filename != self.filename:
            return default
        code_line = self._code_line(frame.f_code, frame.f_lasti)
        k = bisect_right(self.code_lines, code_line) - 1 if code_line is not None else -1
        return self.template_lines[k] if k >= 0 else default

    def _code_line(self, code: Any, offset: int) -> int | None:
        table = self.tables.get(code)
        if table is None:
            starts, numbers = [], []
            for start, _, number in code.co_lines():
                if number is not None:
                    starts.append(start)
                    numbers.append(number)
            table = self.tables[code] = (starts, numbers)
        k = bisect_right(table[0], offset) - 1
        return table[1][k] if k >= 0 else None


def _template_line(exc: BaseException, filename: str) -> int | None:
    """The innermost template line of ``filename`` in the (Jinja-rewritten) traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
