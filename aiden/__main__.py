"""``python -m aiden``."""

import sys

from aiden.cli import main

sys.exit(main())
