"""Run the ``fusemap`` CLI in-process, as a user would, and capture what it prints."""

from __future__ import annotations

import sys

from fusemap import cli


def run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    """Run ``fusemap <args>`` in-process; (exit status, stdout + stderr)."""
    monkeypatch.setattr(sys, "argv", ["fusemap", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out + captured.err
