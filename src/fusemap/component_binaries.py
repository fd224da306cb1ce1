"""Make the simulators behind the component model library run on this machine.

``hwcomponents-cacti`` and ``hwcomponents-neurosim`` ship prebuilt CACTI and NeuroSim
binaries that need a recent C library (GLIBC 2.38). Both packages also ship the C++
sources: this script checks that each binary runs and, when it does not, builds it from
those sources in place (about a minute each, needs ``make`` and ``g++``).

Run it after ``pip install 'fusemap[components]'``:

    python -m fusemap.component_binaries          # check, build what does not run
    python -m fusemap.component_binaries --check  # check only (exit status 1 if broken)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Simulator:
    """A simulator binary inside a model package, and how to tell that it runs."""

    name: str
    package: str
    binary: str  # relative to the package directory
    usage_marker: str  # printed by a working binary run without arguments


SIMULATORS = (
    Simulator("CACTI", "hwcomponents_cacti", "cacti/cacti", "how to use CACTI"),
    Simulator("NeuroSim", "hwcomponents_neurosim", "NeuroSim/main", "Usage:"),
)


def package_dir(package: str) -> Path | None:
    """Where an installed package lives (None if it is not installed)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations)))


def runs(binary: Path, marker: str) -> bool:
    """Whether ``binary`` starts here (run without arguments, it prints its usage)."""
    if not binary.is_file():
        return False
    try:
        done = subprocess.run(
            [str(binary)], cwd=binary.parent, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return marker in done.stdout + done.stderr


class BuildError(Exception):
    """``make`` failed (the message holds the end of its output)."""


def _make(where: Path) -> None:
    jobs = str(max(1, min(os.cpu_count() or 1, 4)))
    done = subprocess.run(["make", "-j", jobs], cwd=where, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise BuildError(f"make failed in {where}: " + " | ".join(tail))


def build_cacti(root: Path) -> None:
    """Rebuild CACTI from the sources beside the binary (shipped objects removed first)."""
    src = root / "cacti"
    for stale in [src / "cacti", *src.glob("obj_*/*.o"), *src.glob("obj_*/cacti")]:
        stale.unlink(missing_ok=True)
    _make(src)


def build_neurosim(root: Path) -> None:
    """Build NeuroSim as the package's own build does: the DNN+NeuroSim sources with the
    package's ``drop_in`` files over them, then ``make``; the binary goes to NeuroSim/."""
    sources = root / "DNN_NeuroSim_V1.3" / "Inference_pytorch" / "NeuroSIM"
    with tempfile.TemporaryDirectory(prefix="neurosim-build-") as tmp:
        work = Path(tmp)
        shutil.copytree(sources, work, dirs_exist_ok=True)
        shutil.copytree(root / "drop_in", work, dirs_exist_ok=True)
        for stale in [*work.glob("*.o"), work / "main"]:
            stale.unlink(missing_ok=True)
        _make(work)
        target = root / "NeuroSim" / "main"
        target.parent.mkdir(exist_ok=True)
        shutil.copy2(work / "main", target)


BUILDERS = {"CACTI": build_cacti, "NeuroSim": build_neurosim}


def ensure(check_only: bool = False, echo=print) -> bool:
    """Check every simulator; build the ones that do not run. True if all run."""
    ok = True
    for sim in SIMULATORS:
        root = package_dir(sim.package)
        if root is None:
            echo(f"{sim.name}: {sim.package} is not installed (pip install 'fusemap[components]')")
            ok = False
            continue
        binary = root / sim.binary
        if runs(binary, sim.usage_marker):
            echo(f"{sim.name}: {binary} runs")
            continue
        if check_only:
            echo(f"{sim.name}: {binary} does not run here")
            ok = False
            continue
        echo(f"{sim.name}: {binary} does not run here; building it from its sources ...")
        try:
            BUILDERS[sim.name](root)
        except (OSError, BuildError) as err:
            echo(f"{sim.name}: the build failed ({err}); it needs make and g++")
            ok = False
            continue
        works = runs(binary, sim.usage_marker)
        echo(f"{sim.name}: built {binary}" if works else f"{sim.name}: still does not run")
        ok = ok and works
    return ok


def main(argv: list[str] | None = None) -> int:
    """Command line: exit status 0 when every simulator runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check only, build nothing")
    args = parser.parse_args(argv)
    return 0 if ensure(check_only=args.check) else 1


if __name__ == "__main__":
    sys.exit(main())
