"""The Jinja sandbox: nothing it exposes reaches a module, a frame, a function's globals or
``os``; format strings read no attribute or item; every value it hands out is data or a
function written for templates.

The walk starts from every global, every filter and test (applied to sample values) and
sample values of every kind a template handles (strings, numbers, lists, dicts,
namespaces, ``loop``, macros), and follows every attribute and item the sandbox lets a
template read, as deep as it goes.
"""

from __future__ import annotations

import os
import sys
import types
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from jinja2.runtime import Context, Undefined

from fusemap.spec.errors import SpecError
from fusemap.spec.jinja_env import TemplateHost, render_template
from fusemap.spec.jinja_sandbox import SpecEnvironment, is_safe_function

_PROBES = """
__globals__ __class__ __mro__ __subclasses__ __init__ __self__ __func__ __code__
__builtins__ __dict__ __module__ __closure__ __wrapped__ __reduce__ __reduce_ex__
__getattribute__ __base__ __bases__ gi_frame gi_code f_globals f_back f_locals
tb_frame cr_frame ag_frame func_globals im_func environ mro fromkeys format
format_map to_bytes from_bytes extend append update pop clear maketrans encode
environment _environment _func _Namespace__attrs obj os sys
"""
PROBES = _PROBES.split()
FORBIDDEN_TYPES = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    types.GeneratorType,
    type,
)


def module_dicts() -> set[int]:
    return {id(vars(m)) for m in list(sys.modules.values()) if m is not None}


def forbidden(value: Any, modules: set[int]) -> str | None:
    """Why ``value`` must not reach a template, or None."""
    if isinstance(value, FORBIDDEN_TYPES):
        return type(value).__name__
    if isinstance(value, dict) and id(value) in modules:
        return "a module's globals"
    if value is os.environ or value is os or value is sys:
        return "os"
    if isinstance(value, types.FunctionType) and not is_safe_function(value):
        return f"unwrapped function {value.__qualname__}"
    if isinstance(value, types.MethodDescriptorType | types.WrapperDescriptorType):
        return f"unbound method {value!r}"
    if isinstance(value, types.BuiltinFunctionType | types.MethodType):
        owner = getattr(value, "__self__", None)
        if owner is None or isinstance(owner, type | types.ModuleType):
            return f"raw builtin {value!r}"  # len, dict.fromkeys, os.system ...
    return None


@pytest.fixture
def host(tmp_path: Path) -> tuple[TemplateHost, dict[str, Any]]:
    (tmp_path / "spec.yaml").write_text("a: 1\n")
    h = TemplateHost()
    return h, h.template_globals(str(tmp_path / "spec.yaml"))


def samples(env: SpecEnvironment) -> list[Any]:
    """Values of every kind a template handles, made by a template itself."""
    captured: dict[str, Any] = {}

    def keep(**kw: Any) -> str:
        captured.update(kw)
        return ""

    keep.fusemap_safe = True  # type: ignore[attr-defined]
    text = (
        "{% macro m(x) %}{{ x }}{% endmacro %}"
        "{% set ns = namespace(a=1) %}"
        "{% for i in [1, 2] %}{{ keep(loop=loop) }}{% endfor %}"
        "{{ keep(macro=m, ns=ns, s='text', n=3, f=2.5, l=[1, 'a'], t=(1, 2), d={'k': 'v'},"
        " e=('x' | escape), g=([1, 2] | groupby('real')), r=range(3), it=([1] | map('string'))) }}"
    )
    render_template(env, text, "samples.yaml", {"keep": keep})
    return [*captured.values(), True, None, b"bytes"]


@pytest.mark.slow
def test_the_sandbox_walk_reaches_no_module_frame_globals_or_os(host) -> None:
    h, globs = host
    env = h.env
    modules = module_dicts()
    context = Context(env, {}, "walk", {})
    roots: list[Any] = [*env.globals.values(), *globs.values(), *samples(env)]
    for fn in [*env.filters.values(), *env.tests.values()]:
        for value in ("text", [1, 2], {"k": "v"}, 3):
            try:
                args = (context, value) if getattr(fn, "jinja_pass_arg", None) else (value,)
                roots.append(fn(*args))
            except Exception:  # a filter refusing a sample is fine
                pass
        assert forbidden(fn, modules) in (None, f"unwrapped function {fn.__qualname__}")
    seen: set[int] = set()
    queue = deque((r, 0) for r in roots)
    walked = 0
    while queue:
        obj, depth = queue.popleft()
        if id(obj) in seen or depth > 4:
            continue
        seen.add(id(obj))
        walked += 1
        names = set(PROBES) | {n for n in dir(obj) if isinstance(n, str)}
        for name in sorted(names):
            for read in (env.getattr, env.getitem):
                try:
                    value = read(obj, name)
                except Exception:  # refused loudly: fine
                    continue
                if isinstance(value, Undefined):
                    continue
                why = forbidden(value, modules)
                assert why is None, f"{type(obj).__name__}.{name} exposes {why}"
                queue.append((value, depth + 1))
        if isinstance(obj, list | tuple):
            queue.extend((x, depth + 1) for x in obj[:5])
        if isinstance(obj, dict):
            queue.extend((x, depth + 1) for x in list(obj.values())[:5])
    assert walked > 50


def test_globals_are_functions_written_for_templates(host) -> None:
    h, globs = host
    for name, value in [*h.env.globals.items(), *globs.items()]:
        if isinstance(value, float):  # pi
            continue
        assert is_safe_function(value), name
    assert not {"range", "dict", "namespace"} - set(h.env.globals)
    assert "random" not in h.env.filters  # not deterministic
    for name in ("cycler", "joiner", "lipsum"):
        assert name not in h.env.globals


# Each template tries to reach the process environment, a module or a frame.
ESCAPES = [
    '{{ str.format("{0.__globals__[os].environ[HOME]}", include) }}',
    '{{ "{0.__globals__}".format(include) }}',
    '{{ "{0[HOME]}".format(env) }}',
    '{{ "{x.__class__}".format(x=1) }}',
    '{{ "{0.__init__.__globals__[os]}".format(namespace()) }}',
    '{{ ("{0." ~ "__globals__}").format(range) }}',
    '{{ "{.real.__class__}".format(1) }}',
    '{{ ("{0.__globals__}" | attr("format"))(include) }}',
    '{{ ("" | attr("format"))("{0.__globals__}", include) }}',
    '{{ "x".format_map({"a": include}) ~ "{a.__globals__}".format_map({"a": include}) }}',
    "{{ range.__globals__ }}",
    "{{ dict.fromkeys([1]) }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ (1).to_bytes(4, 'big') }}",
    "{{ loop_of.__class__ }}",
    "{{ [].__class__.__base__.__subclasses__() }}",
    "{{ include.__globals__ }}",
    "{{ (include | attr('__globals__')) }}",
    "{{ ([1] | map('string') | first).__class__ }}",
    "{% for x in [1] %}{{ loop.__class__.__init__.__globals__ }}{% endfor %}",
    "{% macro m() %}{% endmacro %}{{ m._func.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ [1, 2] | map(attribute='__class__') | list }}",
    "{{ [{'a': 1}] | selectattr('__class__') | list }}",
    "{{ sorted([1], key=include.__call__) }}",
    "{{ max([1], key='x'.ljust) }}",
    "{{ lipsum() }}{{ cycler(1) }}",
]


@pytest.mark.parametrize("text", ESCAPES)
def test_escapes_are_refused(text: str, host) -> None:
    """Refused with a located line, or rendered to something that shows no object."""
    h, globs = host
    home = os.environ.get("HOME", "/root")
    variables = {**globs, "HOME": home, "env": {"HOME": home}}
    try:
        out, _ = render_template(h.env, text, "t.yaml", variables)
    except SpecError as err:
        message = str(err)
        assert message.startswith("t.yaml:1: "), message
        assert home not in message.replace(text, "")
        return
    assert "<" not in out and "environ" not in out and home not in out, out


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("{{ '{} and {}'.format(1, 'b') }}", "1 and b"),
        ("{{ '{x:>4}'.format(x=7) }}", "   7"),
        ("{{ '%05.1f' | format(3.14159) }}", "003.1"),
        ("{{ 'a-b' ~ 1 ~ [2] }}", "a-b1[2]"),
        ("{{ str(3) ~ int('4') ~ list((5,)) ~ dict(a=1) }}", "34[5]{'a': 1}"),
        ("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
         "{% endfor %}{{ ns.n }}", "6"),
        ("{{ max([3, 1, 2]) }} {{ sorted([3, 1, 2], reverse=true) }}", "3 [3, 2, 1]"),
        ("{{ 'x'.ljust(3) ~ '|' }}", "x  |"),
        ("{{ {'a': 1}.items() | list }}", "[('a', 1)]"),
    ],
)  # fmt: skip
def test_ordinary_templates_still_work(text: str, out: str, host) -> None:
    h, globs = host
    assert render_template(h.env, text, "t.yaml", globs)[0] == out


@pytest.mark.parametrize(
    "line",
    [
        "# {{ include_text('/proc/self/environ') }}",
        "# {{ include_text('/proc/self/cmdline') | length }}",
        "# {{ include('/proc/self/environ') }}",
        "# {{ include_text('/dev/zero') }}",
        "# {{ include_text('/sys/kernel/hostname') }}",
        "x: !include /proc/self/environ",
    ],
)
def test_system_files_are_not_read(tmp_path, monkeypatch, capsys, line: str) -> None:
    from tests.support.cli_helpers import run_cli
    from tests.support.cli_specs import ARCH, WORKLOAD

    (tmp_path / "arch.yaml").write_text(line + "\n" + ARCH)
    (tmp_path / "wl.yaml").write_text(WORKLOAD)
    files = [str(tmp_path / "arch.yaml"), str(tmp_path / "wl.yaml")]
    code, out = run_cli(["check", *files], monkeypatch, capsys)
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert "arch.yaml:1: " in out and "internal error" not in out
    assert "a spec may not read system files" in out or "not found" in out
    assert os.environ.get("HOME", "/nonexistent") + "\x00" not in out
