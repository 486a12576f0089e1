"""``schemas check`` shows a registry's verbose messages as ``schemas diff`` shows findings."""

from __future__ import annotations

from headwater.registry.compatibility import Incompatibility, Kind, Level, check
from headwater.registry.schema import parse
from headwater_cli.schemas import describe, readable

OLD = '{"type": "record", "name": "C", "fields": [{"name": "a", "type": "int"}]}'
NEW = (
    '{"type": "record", "name": "C", "fields": [{"name": "a", "type": "int"}, '
    '{"name": "b", "type": "string"}]}'
)


def test_headwaters_messages_read_as_diffs_findings() -> None:
    findings = check(parse(NEW), [(3, parse(OLD))], Level.BACKWARD)
    assert readable([f.message() for f in findings]) == [
        f"{line} (version 3)" for line in describe(findings)
    ]
    assert readable([f.message() for f in findings]) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1: The field 'b' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema (version 3)"
    ]


def test_confluents_messages_with_their_context_lines() -> None:
    # Confluent's registry: the finding, then the version, the old schema and the level.
    messages = [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'b'}",
        "{oldSchemaVersion: 2}",
        '{oldSchema: \'{"type":"record","name":"C","fields":[{"name":"a","type":"int"}]}\'}',
        "{validateFields: 'false', compatibility: 'BACKWARD'}",
    ]
    assert readable(messages) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1: The field 'b' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema (version 2)"
    ]


def test_a_message_of_another_shape_is_kept_as_it_is() -> None:
    inc = Incompatibility(Kind.TYPE_MISMATCH, "/fields/0/type", "reader type: INT")
    assert readable(["something else entirely"]) == ["something else entirely"]
    assert (
        inc.describe()
        in readable(
            [f"{{errorType:'TYPE_MISMATCH', description:'{inc.describe()}', additionalInfo:'x'}}"]
        )[0]
    )
