"""``python -m graphtape.tui``: the same command line as ``graphtape``."""

import sys

from graphtape.tui.cli import main

sys.exit(main())
