"""Clients' reload requests waiting their turn (daemon/broker/reload/asking.py): in order, a
dry run whose client went is dropped, a reload asked for is not, and a stopping daemon
answers every request still waiting."""

from __future__ import annotations

from daemon.broker.reload.asking import ReloadRequests
from daemon.wire.protocol import ReloadRequest

RELOAD = ReloadRequest()
DRY_RUN = ReloadRequest(dry_run=True)


async def test_requests_are_taken_in_order_and_answered() -> None:
    requests = ReloadRequests()
    assert requests.take() is None
    first, second = requests.ask(RELOAD), requests.ask(DRY_RUN)
    assert requests.arrived.is_set()
    taken = requests.take()
    assert taken is not None
    assert taken.request == RELOAD
    taken.give({"ok": True})
    assert first.result() == {"ok": True}
    assert requests.arrived.is_set()  # the dry run still waits
    taken = requests.take()
    assert taken is not None
    assert taken.request == DRY_RUN
    assert not requests.arrived.is_set()
    taken.give({"ok": False})
    assert second.result() == {"ok": False}


async def test_a_dry_run_whose_client_went_is_dropped_a_reload_is_not() -> None:
    requests = ReloadRequests()
    gone_dry_run, gone_reload = requests.ask(DRY_RUN), requests.ask(RELOAD)
    gone_dry_run.cancel()  # what the connection does when its client goes
    gone_reload.cancel()
    for _ in range(100):  # abandoned dry runs never pile up
        requests.ask(DRY_RUN).cancel()
    assert len(requests._waiting) == 2
    taken = requests.take()
    assert taken is not None
    assert taken.request == RELOAD  # made even so; its answer has nobody to go to
    taken.give({"ok": True})
    assert requests.take() is None


async def test_a_stopping_daemon_answers_every_request_left() -> None:
    requests = ReloadRequests()
    current, waiting, dry = requests.ask(RELOAD), requests.ask(RELOAD), requests.ask(DRY_RUN)
    assert requests.take() is not None
    requests.close()
    for answer in (current, waiting):
        assert answer.result()["code"] == "shutting_down"
        assert answer.result()["ok"] is False
    assert dry.result()["dry_run"] is True
    assert dry.result()["code"] == "shutting_down"
    late = requests.ask(RELOAD)
    assert late.result()["code"] == "shutting_down"
    assert requests.take() is None
