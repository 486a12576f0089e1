"""A one-offset checkpoint file (``log-start-offset``, ``replication-offset-checkpoint``).

The file holds one decimal offset and a newline. It is replaced atomically (a temporary file,
fsynced when asked, then renamed), so a crash leaves the old value or the new one, never a
torn one; a missing or unreadable file reads as 0.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_offset(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def write_offset(path: Path, offset: int, *, sync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"{offset}\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
