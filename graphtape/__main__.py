"""``python -m graphtape``: the same command line as ``graphtape``."""

import sys

from graphtape.tui.cli import main

sys.exit(main())
