"""Idle connections against the real daemon as PID 1 with a low descriptor limit: the daemon
holds a bounded number, ``health`` and ``trigger`` keep working, and the incident is logged
once (not per connection)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.harness import Daemon

IDLE_CLIENTS = 200  # past a 128-descriptor limit


@pytest.mark.timeout(120)
def test_idle_connections_at_the_descriptor_limit_leave_health_and_trigger_working(
    workdir: Path,
) -> None:
    # prlimit sets the limit and execs the daemon: PID 1 with 128 descriptors.
    daemon = Daemon(workdir, ("echo", "ran"), init=("prlimit", "--nofile=128:128"))
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_CLIENTS):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            idle.append(client)  # a daemon that no longer accepts leaves this hanging
            client.connect(str(daemon.socket))
        health = daemon.exec("health")
        assert health.returncode == 0, health.stdout + health.stderr
        trigger = daemon.exec("trigger")
        assert trigger.returncode == 0, trigger.stderr
        assert trigger.stdout == "ran\n"
    finally:
        for client in idle:
            client.close()
        daemon.stop()
    limited = daemon.log.events("socket.connections_limited")
    assert len(limited) == 1, limited  # one line for the incident, not one per connection
    assert limited[0]["limit"] == "connections"
    assert limited[0]["descriptor_limit"] == 128
