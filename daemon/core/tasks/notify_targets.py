"""Who hears about a task's runs, as the values a ``Task`` carries: its webhook, ping and
command targets (``TaskNotify``), the events each listens to, and a URL that is never shown
(``Secret``). Reading them from the tasks file's ``[notify]`` tables is
``daemon.taskfile.notify_config``'s; delivering them is ``daemon.notify``'s."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("webhook", "ping", "command")
EVENTS = ("start", "success", "failure", "recovery", "silence")
CHANGE = "change"  # in ``on``: the failure after a success, and the recovery; not the others
CHANGE_EVENTS = frozenset({"failure", "recovery"})
PING_EVENTS = frozenset({"start", "success", "failure"})  # a ping service must see every run
HTTP_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 10.0
ATTEMPTS = 3
BACKOFF_S = 1.0


class Secret:
    """A text that is never shown: ``reveal()`` gives it to the one sender that needs it."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value = value
        self.source = source  # "tasks file", "file /run/secrets/x", "env HOOK_URL"

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret(from {self.source})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class HttpTarget:
    """A webhook or a ping URL: where, on which events, and its bounded retries."""

    url: Secret
    on: frozenset[str]
    timeout_s: float = HTTP_TIMEOUT_S
    attempts: int = ATTEMPTS
    backoff_s: float = BACKOFF_S

    def give_up_after_s(self) -> float:
        """The longest one notice can take at this target: every attempt and every pause."""
        pauses_s = sum(self.backoff_s * (1 << n) for n in range(self.attempts - 1))
        return self.attempts * self.timeout_s + pauses_s


@dataclass(frozen=True)
class CommandHook:
    argv: tuple[str, ...]
    on: frozenset[str]
    timeout_s: float = COMMAND_TIMEOUT_S


@dataclass(frozen=True)
class TaskNotify:
    """A task's notifications. ``off`` (a task's own table only): the kinds it turns off."""

    webhook: HttpTarget | None = None
    ping: HttpTarget | None = None
    command: CommandHook | None = None
    max_silence_s: float | None = None
    max_silence_auto: bool = False  # ``"auto"``: two of the task's cadences (``notify.silence``)
    off: frozenset[str] = field(default=frozenset())

    def targets(self) -> tuple[HttpTarget | CommandHook | None, ...]:
        return (self.webhook, self.ping, self.command)

    def wants(self, event: str) -> bool:
        return any(target is not None and event in target.on for target in self.targets())

    def hears(self, events: tuple[str, ...], changed: bool) -> bool:
        """Some target hears a notice of ``events`` (``changed``: see ``heard_event``)."""
        return any(
            target is not None and heard_event(target.on, events, changed) is not None
            for target in self.targets()
        )

    @property
    def empty(self) -> bool:
        silence = self.max_silence_s is not None or self.max_silence_auto
        return not silence and all(t is None for t in self.targets())


def heard_event(on: frozenset[str], events: tuple[str, ...], changed: bool) -> str | None:
    """The event a target listening to ``on`` hears of a notice of ``events`` (the first of
    them it listens to), or None. ``changed``: the notice changes the task's state (its failure
    after a success, its recovery), which ``change`` in ``on`` hears: an on-call target told
    once when a task starts failing and once when it recovers, not at every failure between."""
    for event in events:
        if event in on or (changed and CHANGE in on and event in CHANGE_EVENTS):
            return event
    return None
