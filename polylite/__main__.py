"""``python -m polylite``: same as the ``polylite`` command."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
