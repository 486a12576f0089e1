"""``python -m headwater`` runs the CLI."""

import sys

from headwater.cli import main

sys.exit(main())
