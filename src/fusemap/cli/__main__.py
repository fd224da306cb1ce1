"""``python -m fusemap.cli``."""

from .main import main

main()
