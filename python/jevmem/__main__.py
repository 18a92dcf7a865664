"""``python -m jevmem``: the ``jevmem`` command line (`jevmem.cli`)."""

from __future__ import annotations

import sys

from jevmem.cli import main

if __name__ == "__main__":
    sys.exit(main())
