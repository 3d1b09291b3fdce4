"""``python -m tui``: the same command line as ``graphtape``."""

import sys

from tui.cli import main

sys.exit(main())
