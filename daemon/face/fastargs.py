"""A fast path for parsing ``runbroker trigger`` arguments without argparse.

Every ``docker exec`` starts ``trigger`` cold, and building argparse's parsers costs more than
the whole round trip to the daemon. It takes exactly the common forms and returns None for
anything else, which argparse then parses (a property test checks that both agree). The value
rules both parsers apply are defined here, once.
"""

from __future__ import annotations

_VALUE_FLAGS = ("--arg", "--env", "--timeout", "--socket")
_BOOL_FLAGS = ("--detach", "--json")


class TriggerArgs:
    """The parsed arguments (a plain class: ``typing.NamedTuple`` costs a cold start)."""

    __slots__ = ("args", "as_json", "detach", "env", "socket", "task", "timeout")

    def __init__(
        self,
        *,
        task: str,
        args: tuple[str, ...],
        env: tuple[tuple[str, str], ...],
        detach: bool,
        as_json: bool,
        timeout: str | None,
        socket: str | None,
    ) -> None:
        self.task = task
        self.args = args
        self.env = env
        self.detach = detach
        self.as_json = as_json
        self.timeout = timeout
        self.socket = socket


def positive_duration(text: str) -> float:
    """A Go-style duration that must be positive, or ValueError with the reason."""
    from daemon.schedules.duration import parse_duration  # only when --timeout is given

    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError("must be positive")
    return seconds


def split_env(text: str) -> tuple[str, str] | None:
    """``K=V`` as ``(K, V)``, ``V`` possibly empty. None without ``=`` or without a name."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        return None
    return name, value


def attach_values(words: list[str]) -> list[str]:
    """``--arg --flag`` as ``--arg=--flag``: a value flag takes the next word as its value even
    when it starts with a dash, as the Go client's flags do (argparse would take it for an
    option). Words after a lone ``--`` are left as they are, and a lone ``--`` is never a value
    (argparse would turn it into an empty list)."""
    attached: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            attached.extend(words[index - 1 :])
            break
        if word in _VALUE_FLAGS and index < len(words) and words[index] != "--":
            attached.append(f"{word}={words[index]}")
            index += 1
        else:
            attached.append(word)
    return attached


def parse_trigger(words: list[str]) -> TriggerArgs | None:
    """The arguments after ``trigger``, or None when argparse must decide."""
    task: str | None = None
    args: list[str] = []
    env: list[tuple[str, str]] = []
    flags = {"--detach": False, "--json": False}
    values: dict[str, str | None] = {"--timeout": None, "--socket": None}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word in _BOOL_FLAGS:
            flags[word] = True
            continue
        name, has_eq, inline = word.partition("=")
        if name in _VALUE_FLAGS:
            if has_eq:
                value = inline
            elif index < len(words):
                value = words[index]
                index += 1
            else:
                return None
            if value == "--":
                return None  # argparse cannot take a lone "--" as a value: it refuses it
            if name == "--arg":
                args.append(value)
            elif name == "--env":
                pair = split_env(value)
                if pair is None:
                    return None
                env.append(pair)
            elif values[name] is not None:
                return None  # repeated: argparse checks every occurrence, so let it decide
            else:
                values[name] = value
            continue
        if word.startswith("-") or task is not None:
            return None
        task = word
    return TriggerArgs(
        task=task if task is not None else "default",
        args=tuple(args),
        env=tuple(env),
        detach=flags["--detach"],
        as_json=flags["--json"],
        timeout=values["--timeout"],
        socket=values["--socket"],
    )
