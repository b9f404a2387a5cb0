"""The answers of the control requests ``status``, ``health``, ``cancel``, ``reload`` and
``next``: a field dict each, ``event`` among them (``logs`` has its own, in ``logs_answers``).
Part of the wire vocabulary of ``protocol``, which the thin client loads alone: these are the
daemon's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from daemon.wire.control_shapes import HealthAnswer, ReloadMove
from daemon.wire.protocol import clip
from daemon.wire.reasons import CODE_NO_SUCH_RUN, CODE_RELOAD_REFUSED, CODE_UNHEALTHY

EVENT_CANCEL = "cancel"
EVENT_HEALTH: Final = "health"
EVENT_STATUS: Final = "status"
EVENT_RELOAD = "reload"
EVENT_NEXT: Final = "next"
CANCEL_QUEUED = "queued"  # the run left the queue with a cancelled result
CANCEL_RUNNING = "running"  # the running run was asked to stop, and its result says when it did


def cancel_answer(run_id: str, state: str, detail: str = "") -> dict[str, Any]:
    answer: dict[str, Any] = {"event": EVENT_CANCEL, "ok": True, "id": run_id, "state": state}
    if detail:
        answer["detail"] = detail
    return answer


def cancel_refusal(run_id: str) -> dict[str, Any]:
    reason = f"no queued or running run {clip(run_id)!r}"
    return {
        "event": EVENT_CANCEL,
        "ok": False,
        "id": run_id,
        "reason": reason,
        "code": CODE_NO_SUCH_RUN,
    }


def health_answer(
    problem: str | None, warnings: list[str] | None = None, not_ready: str | None = None
) -> HealthAnswer:
    """The ``health`` answer: ``ok`` (live) unless there is a ``problem``, which is the reason.

    ``ready`` when live and nothing keeps it ``not_ready`` (the database). What is wrong without
    making the daemon unhealthy goes in ``warnings``, omitted when none."""
    why_not_ready = problem or not_ready or ""
    answer: HealthAnswer = {
        "event": EVENT_HEALTH,
        "ok": problem is None,
        "reason": problem or "",
        "ready": not why_not_ready,
        "ready_reason": why_not_ready,
    }
    if problem:
        answer["code"] = CODE_UNHEALTHY
    if warnings:
        answer["warnings"] = warnings
    return answer


def reload_answer(
    ok: bool,
    reason: str = "",
    changes: Mapping[str, list[str]] | None = None,
    code: str = CODE_RELOAD_REFUSED,
) -> dict[str, Any]:
    """A reload's outcome: ``changes`` maps added, removed, changed, unchanged to task names.

    ``reason`` says why it was refused (the old tasks stay), ``code`` is its code."""
    answer: dict[str, Any] = {"event": EVENT_RELOAD, "ok": ok, "reason": reason}
    if not ok:
        answer["code"] = code
    answer.update(changes or {})
    return answer


def reload_plan_answer(
    ok: bool,
    reason: str = "",
    changes: Mapping[str, list[str]] | None = None,
    moves: list[ReloadMove] | None = None,
    code: str = CODE_RELOAD_REFUSED,
) -> dict[str, Any]:
    """A reload's dry run: what ``reload_answer`` would say, with ``dry_run`` and each
    ticking task's next time before and after (``moves``); nothing was changed."""
    answer = reload_answer(ok, reason, changes, code)
    answer["dry_run"] = True
    if ok:
        answer["moves"] = moves or []
    return answer


def next_refusal(reason: str, code: str) -> dict[str, Any]:
    """``next`` naming a task the daemon does not have."""
    return {"event": EVENT_NEXT, "ok": False, "reason": reason, "code": code}
