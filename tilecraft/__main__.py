"""``python -m tilecraft``: the same command line as the ``tilecraft`` script (tilecraft.cli)."""

import sys

from tilecraft.cli import main

sys.exit(main())
