"""The container tier's engine set-up (tests/support/podman_engine.py), the parts that need
no engine: the rendered podman configuration and the python stand-in's pip settings."""

from __future__ import annotations

import configparser
import threading
import tomllib
from pathlib import Path

import pytest

from tests.support import podman_engine


def test_rendered_configuration_is_complete_toml(tmp_path: Path) -> None:
    values = {"STATE": str(tmp_path), "RUN": str(tmp_path / "run"), "NOFILE": "4096"}
    values["NPROC"] = "512"
    engine_dir = podman_engine.ENGINE_FILES
    conf = tomllib.loads(
        podman_engine.render((engine_dir / "containers.conf.in").read_text(), values)
    )
    assert conf["engine"]["runtime"] == "runc"
    assert conf["engine"]["cgroup_manager"] == "cgroupfs"
    assert conf["engine"]["events_logger"] == "file"
    assert conf["containers"]["default_ulimits"] == ["nofile=4096:4096", "nproc=512:512"]
    storage = tomllib.loads(
        podman_engine.render((engine_dir / "storage.conf.in").read_text(), values)
    )
    assert storage["storage"]["driver"] == "overlay"
    assert storage["storage"]["graphroot"] == str(tmp_path / "storage")
    tomllib.loads((engine_dir / "registries.conf").read_text())


def test_a_placeholder_left_unfilled_is_an_error() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        podman_engine.render('a = "@STATE@"\nb = "@OTHER@"\n', {"STATE": "/x"})


def test_limits_are_the_hard_ones_with_nproc_at_most_pid_max() -> None:
    nofile, nproc = podman_engine.hard_limits()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert 0 < nproc <= pid_max
    assert nofile >= 1024


def test_pip_conf_keeps_the_hosts_settings_and_trusts_the_system_bundle(tmp_path: Path) -> None:
    host = tmp_path / "pip.conf"
    host.write_text(
        "[global]\ntimeout = 60\ncert = /somewhere/else.pem\n[install]\nno-compile = 1\n"
    )
    text = podman_engine.pip_conf({"PIP_INDEX_URL": "https://index.example/simple"}, host)
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_string(text)
    assert conf.get("global", "timeout") == "60"
    assert conf.get("global", "index-url") == "https://index.example/simple"
    assert conf.get("global", "cert") == "/etc/ssl/certs/ca-certificates.crt"
    assert conf.get("install", "no-compile") == "1"
    bare = configparser.ConfigParser(interpolation=None)
    bare.read_string(podman_engine.pip_conf({}, tmp_path / "missing.conf"))
    assert dict(bare["global"]) == {"cert": "/etc/ssl/certs/ca-certificates.crt"}


def test_a_long_step_says_it_started_is_still_going_and_ended(
    capsys: pytest.CaptureFixture[str],
) -> None:
    beats = threading.Event()
    lines: list[str] = []
    real_log = podman_engine.log

    def log(message: str) -> None:
        lines.append(message)
        real_log(message)
        if message.startswith("still "):
            beats.set()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(podman_engine, "log", log)
        with podman_engine.step("building an image", heartbeat_s=0.01):
            assert beats.wait(30), "no heartbeat while the step ran"
    assert lines[0] == "building an image ..."
    assert lines[1].startswith("still building an image (")
    assert lines[-1].startswith("building an image: done in ")
    assert "engine: building an image ..." in capsys.readouterr().err
