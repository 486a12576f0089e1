"""``python -m headwater_cli`` runs the CLI."""

import sys

from headwater_cli import main

sys.exit(main())
