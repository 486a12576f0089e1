"""Compatibility configuration: the global and per-subject level and normalize flag."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.registry.compatibility import Level
from headwater.registry.errors import InvalidCompatibilityLevelError, SubjectConfigNotFoundError
from headwater_registry.documents import ConfigDocument, ConfigUpdate
from headwater_registry.names import check_subject
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import ConfigRow, Transaction
from headwater_registry.store.tables import GLOBAL


@dataclass(frozen=True)
class EffectiveConfig:
    """What governs a subject's registrations: its own setting, else the global one, else the
    registry's default level (and no normalizing)."""

    level: Level
    normalize: bool


class Configs:
    """``/config`` and ``/config/{subject}``, over the ``configs`` rows."""

    def __init__(self, store: SQLStore, default_level: Level) -> None:
        self.store = store
        self.default_level = default_level

    def get(self, subject: str | None, *, default_to_global: bool) -> ConfigDocument:
        with self.store.read() as tx:
            if subject is not None:
                found = tx.get_config(subject)
                if found is not None and found.compatibility is not None:
                    return _document(found.compatibility, found.normalize)
                if not default_to_global:
                    raise _not_configured(subject)
            found = tx.get_config(GLOBAL)
        if found is None or found.compatibility is None:
            return {"compatibilityLevel": self.default_level.value}
        return _document(found.compatibility, found.normalize)

    def put(
        self, subject: str | None, *, compatibility: str | None, normalize: bool | None
    ) -> ConfigUpdate:
        """Set the level and/or the flag; what is not given keeps its current value."""
        level = parse_level(compatibility) if compatibility is not None else None
        if subject is not None:
            check_subject(subject)
        key = GLOBAL if subject is None else subject

        def put(tx: Transaction) -> ConfigUpdate:
            old = tx.get_config(key)
            new_level = level.value if level else (old.compatibility if old else None)
            new_normalize = normalize if normalize is not None else (old.normalize if old else None)
            if new_level is None:
                new_level = self.default_level.value
            tx.put_config(key, ConfigRow(new_level, new_normalize))
            update: ConfigUpdate = {"compatibility": new_level}
            if new_normalize is not None:
                update["normalize"] = new_normalize
            return update

        return self.store.write(put, key)

    def delete(self, subject: str | None) -> ConfigDocument:
        """Remove the setting; answers what it was (the global one falls back to the default)."""
        key = GLOBAL if subject is None else subject

        def delete(tx: Transaction) -> ConfigDocument:
            old = tx.get_config(key)
            if (old is None or old.compatibility is None) and subject is not None:
                raise _not_configured(subject)
            tx.delete_config(key)
            if old is None or old.compatibility is None:
                return {"compatibilityLevel": self.default_level.value}
            return _document(old.compatibility, old.normalize)

        return self.store.write(delete, key)

    def effective(self, tx: Transaction, subject: str) -> EffectiveConfig:
        rows = tx.configs_for(subject)
        level, normalize = None, None
        for key in (subject, GLOBAL):
            found = rows.get(key)
            if found is not None:
                level = level or found.compatibility
                normalize = found.normalize if normalize is None else normalize
        return EffectiveConfig(Level(level) if level else self.default_level, bool(normalize))


def parse_level(level: str | None) -> Level:
    """A compatibility level in any case (42203 unless it is one)."""
    try:
        return Level(str(level).upper())
    except ValueError:
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level {level!r}: expected one of "
            f"{', '.join(lv.value for lv in Level)}"
        ) from None


def _document(level: str, normalize: bool | None) -> ConfigDocument:
    doc: ConfigDocument = {"compatibilityLevel": level}
    if normalize is not None:
        doc["normalize"] = normalize
    return doc


def _not_configured(subject: str) -> SubjectConfigNotFoundError:
    return SubjectConfigNotFoundError(
        f"Subject '{subject}' does not have subject-level compatibility configured"
    )
