"""Regenerate tests/golden/numbers.json from the code as it is.

    python tests/golden/regenerate.py      # from the repository, fusemap importable

Run it when a change of the numbers is intended (a fix of the model or of the mapper),
and say in the commit which numbers changed and why; it prints them. The cases are in
tests/golden/cases.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository, for tests.golden

from tests.golden.cases import CASES, numbers  # noqa: E402

NUMBERS = HERE / "numbers.json"
ABOUT = (
    "Golden numbers of the project's own examples (tests/golden/cases.py), checked by "
    "tests/golden/test_golden.py to a relative 1e-9; regenerate with "
    "`python tests/golden/regenerate.py`."
)


def main() -> None:
    old = json.loads(NUMBERS.read_text())["cases"] if NUMBERS.exists() else {}
    new = {}
    for case in CASES:
        new[case.name] = numbers(case)
        for key, value in new[case.name].items():
            before = old.get(case.name, {}).get(key)
            if before != value:
                print(f"{case.name}: {key}: {before} -> {value}")
    NUMBERS.write_text(json.dumps({"about": ABOUT, "cases": new}, indent=2) + "\n")
    print(f"wrote {NUMBERS} ({sum(len(v) for v in new.values())} numbers, {len(new)} cases)")


if __name__ == "__main__":
    main()
