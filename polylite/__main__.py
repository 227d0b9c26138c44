"""``python -m polylite``: same as the ``polylite`` command."""
import sys

from .cli import main

sys.exit(main())
