"""``python -m tidelog``: the ``tidelog`` command (``tidelog.cli``)."""

import sys

from tidelog.cli import main

if __name__ == "__main__":
    sys.exit(main())
