"""Modes: whether a subject (or the whole registry) takes writes, and IMPORT with explicit ids."""

from __future__ import annotations

from headwater.registry.errors import (
    InvalidModeError,
    OperationNotPermittedError,
    SubjectModeNotFoundError,
)
from headwater_registry.documents import ModeDocument
from headwater_registry.names import check_subject
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import Transaction
from headwater_registry.store.tables import GLOBAL

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
READ_ONLY = ("READONLY", "READONLY_OVERRIDE")
IMPORT = "IMPORT"


class Modes:
    """``/mode`` and ``/mode/{subject}``, over the ``modes`` rows."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    def get(self, subject: str | None, *, default_to_global: bool) -> ModeDocument:
        with self.store.read() as tx:
            if subject is not None:
                found = tx.get_mode(subject)
                if found is not None:
                    return {"mode": found}
                if not default_to_global:
                    raise _not_configured(subject)
            return {"mode": tx.get_mode(GLOBAL) or "READWRITE"}

    def put(self, subject: str | None, mode: str, *, force: bool) -> ModeDocument:
        """Set a mode; IMPORT only where no subject has live versions, unless ``force``."""
        value = mode.upper()
        if value not in MODES:
            raise InvalidModeError(f"Invalid mode {mode!r}: expected one of {', '.join(MODES)}")
        if subject is not None:
            check_subject(subject)
        key = GLOBAL if subject is None else subject

        def put(tx: Transaction) -> ModeDocument:
            if value == IMPORT and not force:
                prefix = "" if subject is None else subject
                has = [
                    s.subject
                    for s in tx.subjects(prefix)
                    if s.live_versions and (subject is None or s.subject == subject)
                ]
                if has:
                    raise OperationNotPermittedError(
                        "Cannot import since found existing subjects; use force=true"
                    )
            tx.put_mode(key, value)
            return {"mode": value}

        return self.store.write(put, key)

    def delete(self, subject: str | None) -> ModeDocument:
        """Remove the mode; answers what it was (the global one falls back to READWRITE)."""
        key = GLOBAL if subject is None else subject

        def delete(tx: Transaction) -> ModeDocument:
            old = tx.get_mode(key)
            if old is None and subject is not None:
                raise _not_configured(subject)
            tx.delete_mode(key)
            return {"mode": old or "READWRITE"}

        return self.store.write(delete, key)

    def effective(self, tx: Transaction, subject: str) -> str:
        """The subject's mode, else the global one; a global READONLY_OVERRIDE beats both."""
        rows = tx.modes_for(subject)
        global_mode = rows.get(GLOBAL, "READWRITE")
        if global_mode == "READONLY_OVERRIDE":
            return global_mode
        return rows.get(subject, global_mode)

    def require_writable(self, tx: Transaction, subject: str) -> str:
        """The subject's effective mode; 42205 if it is read-only."""
        mode = self.effective(tx, subject)
        if mode in READ_ONLY:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
        return mode


def _not_configured(subject: str) -> SubjectModeNotFoundError:
    return SubjectModeNotFoundError(
        f"Subject '{subject}' does not have subject-level mode configured"
    )
