"""``python -m ironaccel``: the ``ironaccel`` command, for environments without its script on PATH."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
