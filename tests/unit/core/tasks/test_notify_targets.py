"""A task's notification targets as values (daemon/core/tasks/notify_targets.py): how long a
target may take, and a URL that no text of it shows."""

from __future__ import annotations

from daemon.core.tasks.notify_targets import HttpTarget, Secret, TaskNotify


def test_the_longest_a_target_takes_is_its_attempts_and_pauses() -> None:
    target = HttpTarget(Secret("http://x", "tasks file"), frozenset(), 2.0, 3, 0.5)
    assert target.give_up_after_s() == 3 * 2.0 + 0.5 + 1.0


def test_a_secret_says_where_it_came_from_and_never_its_value() -> None:
    secret = Secret("https://hooks.example/h?token=s3cr3t", "env HOOK_URL")
    target = HttpTarget(secret, frozenset({"failure"}))
    for text in (repr(secret), str(secret), repr(target), repr(TaskNotify(webhook=target))):
        assert "s3cr3t" not in text
        assert "env HOOK_URL" in text
    assert secret.reveal() == "https://hooks.example/h?token=s3cr3t"
    assert secret == Secret("https://hooks.example/h?token=s3cr3t", "tasks file")


def test_a_notify_without_targets_or_silence_is_empty() -> None:
    assert TaskNotify().empty
    assert not TaskNotify(max_silence_auto=True).empty
    assert not TaskNotify(webhook=HttpTarget(Secret("http://x", "tasks file"), frozenset())).empty
