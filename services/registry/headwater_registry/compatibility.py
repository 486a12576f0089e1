"""Compatibility of a new schema with a subject's versions, at the level its config names.

``POST /compatibility/subjects/{s}/versions[/{v}]`` asks; registration runs the same check
before it accepts a schema. The rules themselves are :mod:`headwater.registry.compatibility`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from headwater.registry.compatibility import Finding, Level, check
from headwater.registry.errors import SubjectNotFoundError, VersionNotFoundError
from headwater.registry.schema import ParsedSchema
from headwater_registry.config import Configs
from headwater_registry.documents import CompatibilityResult
from headwater_registry.names import LATEST, parse_version
from headwater_registry.schemas import SchemaInput, Schemas
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import Transaction, VersionRow


class Compatibility:
    """Would a schema be accepted? Asked without registering it."""

    def __init__(self, store: SQLStore, schemas: Schemas, configs: Configs) -> None:
        self.store = store
        self.schemas = schemas
        self.configs = configs

    def test(
        self,
        subject: str,
        version: str | None,
        schema: SchemaInput,
        *,
        normalize: bool,
        verbose: bool,
    ) -> CompatibilityResult:
        """Check ``schema`` against ``version`` of ``subject``, or against what registering names.

        With a version, only that version is checked (in the direction(s) of the subject's
        level); without, the versions the level names -- the latest, or every live one for
        transitive levels -- exactly as registration would.
        """
        number = None if version is None else parse_version(version)
        with self.store.read() as tx:
            parsed = self.schemas.parse(tx, schema)
            if normalize:
                parsed = parsed.normalized()
            level = self.configs.effective(tx, subject).level
            live = [v for v in tx.versions(subject) if not v.deleted]
            if number is None:
                targets = live
            elif number == LATEST:
                targets = live[-1:]
            else:
                if not live:
                    raise SubjectNotFoundError(f"Subject '{subject}' not found.")
                targets = [v for v in live if v.version == number]
                if not targets:
                    raise VersionNotFoundError(f"Version {number} not found.")
            if number is not None and level.transitive:
                level = Level(level.value.removesuffix("_TRANSITIVE"))
            olds = self._parsed(tx, targets)
        # Checked after the transaction ends: it is CPU work that needs nothing more stored.
        findings = check(parsed, olds, level)
        result: CompatibilityResult = {"is_compatible": not findings}
        if verbose:
            messages = [f.message() for f in findings]
            if findings:
                messages.append(f"{{compatibility: '{level.value}'}}")
            result["messages"] = messages
        return result

    def findings(
        self, tx: Transaction, new: ParsedSchema, versions: Sequence[VersionRow], level: Level
    ) -> list[Finding]:
        """Every incompatibility of ``new`` with ``versions`` (oldest first) at ``level``."""
        return check(new, self._parsed(tx, versions), level)

    def _parsed(
        self, tx: Transaction, versions: Sequence[VersionRow]
    ) -> list[tuple[int | None, ParsedSchema]]:
        return [(v.version, self.schemas.parsed(tx, v.schema_id)) for v in versions]


def incompatible_message(subject: str, findings: Sequence[Finding], level: Level) -> str:
    """The 40901 message: Confluent's sentence, then every finding and the level."""
    details = ", ".join([*(f.message() for f in findings), f"{{compatibility: '{level.value}'}}"])
    return (
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{details}]"
    )
