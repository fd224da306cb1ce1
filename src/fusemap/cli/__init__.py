"""The ``fusemap`` command line: check, render, evaluate, map, sweep, report, diff, passes,
demo.

Every user error prints one line (``file:line: key: message``) and exits with status 2;
``--debug`` shows the traceback instead.
"""

from .app import app
from .demo import demo
from .main import main
from .map_command import map_
from .spec_commands import check, diff, evaluate, passes, render, report
from .sweep_command import sweep

# The commands, in the order ``fusemap --help`` lists them.
for _command in (check, render, evaluate, map_, sweep, report, diff, passes, demo):
    app.command(name="map" if _command is map_ else None)(_command)

__all__ = ["app", "main"]
