"""Output files (--json, -o, --plot): through symlinks, into pipes and devices, modes kept,
clear refusals (directory, not a folder, unknown plot format, an input file), and no
temporary file left behind, even when the run is terminated."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.support.cli_helpers import run_cli
from tests.support.cli_specs import ARCH, MAPPING, WORKLOAD, assert_clean_error, write
from tests.support.marks import slow_except


@pytest.fixture
def spec(tmp_path: Path) -> list[str]:
    return [
        write(tmp_path, "arch.yaml", ARCH),
        write(tmp_path, "wl.yaml", WORKLOAD),
        write(tmp_path, "map.yaml", MAPPING),
    ]


def evaluate(spec, monkeypatch, capsys, *options: str) -> tuple[int, str]:
    return run_cli(["evaluate", "-q", *spec, *options], monkeypatch, capsys)


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_symlink_is_written_through(tmp_path, spec, monkeypatch, capsys):
    target = tmp_path / "out" / "result.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, out = evaluate(spec, monkeypatch, capsys, "--json", str(link))
    assert code == 0, out
    assert link.is_symlink() and '"energy"' in target.read_text()
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "out" / "new.json")
    code, out = evaluate(
        spec, monkeypatch, capsys, "--json", str(dangling), "--plot", str(tmp_path / "p.png")
    )
    assert code == 0, out
    assert dangling.is_symlink() and (tmp_path / "out" / "new.json").exists()


def test_fifo_and_device_are_written_as_streams(tmp_path, spec, monkeypatch, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code, out = evaluate(spec, monkeypatch, capsys, "--json", str(fifo))
    reader.join(timeout=30)
    assert code == 0, out
    assert stat.S_ISFIFO(fifo.stat().st_mode) and b'"energy"' in got[0]
    code, out = evaluate(spec, monkeypatch, capsys, "--json", os.devnull)
    assert code == 0, out
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o640])
def test_an_existing_file_keeps_its_mode(tmp_path, spec, monkeypatch, capsys, mode):
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(mode)
    code, out = evaluate(spec, monkeypatch, capsys, "--json", str(target))
    assert code == 0, out
    assert stat.S_IMODE(target.stat().st_mode) == mode and "energy" in target.read_text()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_umask_mode(tmp_path, spec, monkeypatch, capsys, umask):
    old = os.umask(umask)
    try:
        code, out = evaluate(
            spec,
            monkeypatch,
            capsys,
            "--json",
            str(tmp_path / "n.json"),
            "--plot",
            str(tmp_path / "n.png"),
        )
    finally:
        os.umask(old)
    assert code == 0, out
    for name in ("n.json", "n.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize(
    ("option", "target", "pattern"),
    [
        ("--json", "{dir}", r"cannot write output '.*': it is a directory"),
        (
            "--json",
            "{file}/x.json",
            r"cannot write output '.*blocker/(deeper/)?x\.json': Not a directory",
        ),
        (
            "--json",
            "{file}/deeper/x.json",
            r"cannot write output '.*blocker/(deeper/)?x\.json': Not a directory",
        ),
        ("--plot", "{dir}/energy.bmp2", r"--plot '.*energy\.bmp2': unknown plot format 'bmp2'"),
        ("--plot", "{dir}/energy", r"--plot '.*energy': unknown plot format ''"),
        ("--plot", "{dir}", r"--plot '.*': unknown plot format|cannot write plot"),
        (
            "--json",
            "{input}",
            r"output '.*arch\.yaml' is one of the input files; not overwriting it",
        ),
        ("--plot", "{input_png}", r"plot '.*plot\.png' is one of the input files"),
        ("--json", "{input_link}", r"output '.*to_input\.json' is one of the input files"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    tmp_path, spec, monkeypatch, capsys, option, target, pattern
):
    folder = tmp_path / "d"
    folder.mkdir()
    (tmp_path / "blocker").write_text("a file")
    (tmp_path / "to_input.json").symlink_to(tmp_path / "arch.yaml")
    (tmp_path / "plot.png").symlink_to(tmp_path / "map.yaml")
    names = {
        "dir": str(folder), "file": str(tmp_path / "blocker"), "input": spec[0],
        "input_link": str(tmp_path / "to_input.json"), "input_png": str(tmp_path / "plot.png"),
    }  # fmt: skip
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    listed = listing(tmp_path)
    code, out = run_cli(
        ["evaluate", "-q", *spec, option, target.format(**names)], monkeypatch, capsys
    )
    assert_clean_error(code, out, pattern)
    assert "internal error" not in out and ".tmp" not in out
    assert listing(tmp_path) == listed and listing(folder) == set()
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_an_included_file_is_an_input_too(tmp_path, monkeypatch, capsys):
    (tmp_path / "part.yaml").write_text("x: 1\n")
    arch = write(tmp_path, "arch.yaml", "# {{ include_text('part.yaml') | length }}\n" + ARCH)
    files = [arch, write(tmp_path, "wl.yaml", WORKLOAD), write(tmp_path, "map.yaml", MAPPING)]
    code, out = run_cli(
        ["evaluate", "-q", *files, "--json", str(tmp_path / "part.yaml")], monkeypatch, capsys
    )
    assert_clean_error(code, out, r"output '.*part\.yaml' is one of the input files")
    assert (tmp_path / "part.yaml").read_text() == "x: 1\n"


@pytest.mark.slow
def test_map_outputs_follow_the_same_rules(tmp_path, spec, monkeypatch, capsys):
    code, out = run_cli(["map", spec[0], spec[1], "-o", spec[1]], monkeypatch, capsys)
    assert_clean_error(code, out, r"output '.*wl\.yaml' is one of the input files")
    code, out = run_cli(["map", spec[0], spec[1], "--json", str(tmp_path)], monkeypatch, capsys)
    assert_clean_error(code, out, r"it is a directory")
    link = tmp_path / "best.yaml"
    link.symlink_to(tmp_path / "real_best.yaml")
    code, out = run_cli(["map", spec[0], spec[1], "-o", str(link)], monkeypatch, capsys)
    assert code == 0, out
    assert link.is_symlink() and "mapping:" in (tmp_path / "real_best.yaml").read_text()


KILLED = """
import os, signal, sys
from pathlib import Path
from fusemap.report import io
io.exit_on_signals()
def replace(src, dst):  # terminated between writing the temporary file and renaming it
    os.kill(os.getpid(), signal.{sig})
    raise AssertionError("not reached")
io.os.replace = replace
io.write_atomic(Path(sys.argv[1]) / "out.json", "x" * 100000)
"""


@pytest.mark.parametrize("sig", slow_except(["SIGTERM", "SIGHUP", "SIGINT"], fast=["SIGTERM"]))
def test_a_terminated_write_leaves_no_temporary_file(tmp_path, sig):
    script = textwrap.dedent(KILLED.format(sig=sig))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, timeout=120
    )
    assert proc.returncode != 0
    if sig != "SIGINT":
        assert proc.returncode == 128 + getattr(signal, sig), proc.stderr
    assert listing(tmp_path) == set()
