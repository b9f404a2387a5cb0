"""What ``--help`` and a usage error tell a person, through the command's own entry point."""

from __future__ import annotations

import shlex

import pytest

from daemon import exits
from daemon.face import cli
from daemon.face.parser import build_parser
from daemon.pg.admin import args as jobs_args
from daemon.pg.admin import commands as jobs_cli
from daemon.schedules import parse_schedule
from daemon.settings import KNOWN_VARS


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_trigger_help_explains_task_arg_env_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "trigger", "--help")
    assert "TASK is a task the container defines" in text
    assert "allow_args = true" in text
    assert "allow_env" in text
    section = text[text.index("exit codes:") :].split("\n\n")[0].splitlines()[1:]
    shown = [line.split()[0] for line in section]
    assert shown == ["0", "1", "2", "3", "69", "75", "124", "130", "141"]
    codes = {value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert [int(line.split()[0]) for line in section] == sorted(codes)  # each code of the contract
    assert "75   rejected" in text
    assert '3    skipped: the task has a run queued or running and its on_busy is "skip"' in text


def test_run_help_names_every_setting(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "run", "--help")
    missing = sorted(name for name in KNOWN_VARS if f"  {name} " not in text)
    assert missing == []
    assert "exit codes:" in text


def test_an_unknown_option_gets_the_subcommand_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "trigger", "status", "once"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([command, "--bogus"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"usage: runbroker {command} "), err
        assert f"runbroker {command}: error: unrecognized arguments: --bogus" in err


def test_run_still_takes_its_command_after_the_separator() -> None:
    args = build_parser().parse_args(["run", "--", "sh", "-c", "echo --bogus"])
    assert args.argv == ["--", "sh", "-c", "echo --bogus"]


def test_jobs_add_help_shows_the_schedules_and_valid_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert jobs_cli.main(["add", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--every DUR", "--daily HH:MM", "--weekly DAY HH:MM", "--cron EXPR", "--at"):
        assert flag in text
    examples = [
        shlex.split(line)[3:]
        for line in text.splitlines()
        if line.startswith("  runbroker jobs add ")
    ]
    assert len(examples) >= 5
    for words in examples:
        args = jobs_args.jobs_parser().parse_args(["add", *words])
        spec = jobs_args.schedule_spec(args)
        if spec != "at now":
            parse_schedule(spec, args.tz)  # raises for an example that would be refused
