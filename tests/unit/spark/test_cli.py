"""``headwater validate`` parses the job's options (shared with ``spark/submit.sh``)."""

from __future__ import annotations

import pytest

from headwater_cli import build_parser


def test_validate_command_parses_the_job_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_BROKERS", "http://b0:8082,http://b1:8083")
    monkeypatch.delenv("HEADWATER_REGISTRY_URL", raising=False)
    args = build_parser().parse_args(
        [
            "validate",
            "orders",
            "--stream",
            "--checkpoint",
            "ckpt",
            "--max-records-per-trigger",
            "500",
            "--conf",
            "spark.executor.memory=2g",
        ]
    )
    assert args.command == "validate"
    assert args.topic == "orders"
    assert args.brokers == "http://b0:8082,http://b1:8083"
    assert args.registry == "http://127.0.0.1:8081"
    assert args.stream is True
    assert args.checkpoint == "ckpt"
    assert args.max_records_per_trigger == 500
    assert args.trigger == "availableNow"
    assert args.conf == ["spark.executor.memory=2g"]
    assert args.master is None
    assert callable(args.func)


def test_stream_without_checkpoint_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["validate", "orders", "--stream"])
    assert args.func(args) == 2
    assert "--stream needs --checkpoint DIR" in capsys.readouterr().err


def test_validate_command_parses_gate_strategy_and_key_options() -> None:
    args = build_parser().parse_args(
        [
            "validate",
            "orders",
            "--naming-strategy",
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            "--record-types",
            "shop.Order,shop.Refund",
            "--keys",
            "--max-invalid",
            "10",
            "--max-invalid-ratio",
            "0.01",
            "--no-fail-on-data-loss",
            "--state-dir",
            "s3a://bucket/state",
        ]
    )
    assert args.record_types == "shop.Order,shop.Refund"
    assert args.keys is True
    assert args.max_invalid == 10
    assert args.max_invalid_ratio == 0.01
    assert args.no_fail_on_data_loss is True
    assert args.state_dir == "s3a://bucket/state"
    from headwater_spark.schemas import NamingStrategy

    assert NamingStrategy.parse(args.naming_strategy) is NamingStrategy.TOPIC_RECORD_NAME


def test_bad_strategy_and_ratio_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["validate", "orders", "--naming-strategy", "Topic"])
    assert args.func(args) == 2
    assert "unknown subject naming strategy 'Topic'" in capsys.readouterr().err
    args = build_parser().parse_args(["validate", "orders", "--max-invalid-ratio", "5"])
    assert args.func(args) == 2
    assert "--max-invalid-ratio must be between 0 and 1" in capsys.readouterr().err
