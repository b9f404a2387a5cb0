"""The Kubernetes manifests, checked without a cluster: YAML validity (no duplicate keys),
strict validation against the Kubernetes OpenAPI schemas bundled in ``kubernetes-validate``,
then the facts a correct runbroker Deployment must have."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from daemon.taskfile import parse_tasks_toml
from tests.support.container_files import (
    K8S_DIR,
    RUNBROKER_UID,
    k8s_documents,
    k8s_resource,
    load_yaml_documents,
    settings_for,
)

# The oldest Kubernetes the manifests support, and the newest the schemas bundle.
KUBERNETES_VERSIONS = ("1.28.0", "1.37.0")
HEALTH = ["runbroker", "health"]  # liveness: this process works
READY = ["runbroker", "health", "--ready"]  # readiness: and its database does


def _deployment() -> dict[str, Any]:
    return k8s_resource("Deployment", "runbroker")


def _pod() -> dict[str, Any]:
    pod: dict[str, Any] = _deployment()["spec"]["template"]["spec"]
    return pod


def _container(name: str) -> dict[str, Any]:
    pod = _pod()
    for container in pod.get("initContainers", []) + pod["containers"]:
        if container["name"] == name:
            found: dict[str, Any] = container
            return found
    raise AssertionError(f"no container {name}")


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container.get("env", [])}


def _volume_at(container: dict[str, Any], path: str) -> dict[str, Any]:
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    assert path in mounts, f"{container['name']}: nothing mounted at {path}"
    volumes = {volume["name"]: volume for volume in _pod()["volumes"]}
    volume: dict[str, Any] = volumes[mounts[path]]
    return volume


def test_every_manifest_is_valid_yaml_with_unique_keys() -> None:
    files = sorted(K8S_DIR.glob("*.yaml"))
    assert {f.name for f in files} >= {"deployment.yaml", "kustomization.yaml"}
    for path in files:
        docs = load_yaml_documents(path)
        assert docs, f"{path.name} is empty"
        for doc in docs:
            assert isinstance(doc, dict), path.name
            assert doc.get("apiVersion"), path.name
            assert doc.get("kind"), path.name


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("a: 1\nb: 2\na: 3\n")
    with pytest.raises(AssertionError, match="duplicate key 'a'"):
        load_yaml_documents(path)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_match_the_kubernetes_schemas_strictly(version: str) -> None:
    checked = 0
    for _path, doc in k8s_documents():
        if doc["kind"] == "Kustomization":
            continue  # not an API object; checked below
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 3


def test_schema_validation_is_really_checking() -> None:
    """A control: a misspelt field and a wrong type are both rejected."""
    misspelt = copy.deepcopy(_deployment())
    misspelt["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSIONS[0], strict=True)
    wrong_type = copy.deepcopy(_deployment())
    wrong_type["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSIONS[0], strict=True)


def test_kustomization_lists_the_manifests_but_not_the_example_secret() -> None:
    kustomization = load_yaml_documents(K8S_DIR / "kustomization.yaml")[0]
    resources = kustomization["resources"]
    for name in resources:
        assert (K8S_DIR / name).is_file(), name
    assert "secret.example.yaml" not in resources, "a real Secret is made out of band"
    assert {"deployment.yaml", "configmap.yaml"} <= set(resources)


def test_three_replicas_with_a_matching_selector() -> None:
    deployment = _deployment()
    assert deployment["spec"]["replicas"] == 3
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


def test_pod_and_containers_run_non_root_read_only_without_escalation() -> None:
    pod = _pod()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == RUNBROKER_UID
    assert pod["securityContext"]["runAsGroup"] == RUNBROKER_UID
    assert pod["automountServiceAccountToken"] is False
    for container in pod.get("initContainers", []) + pod["containers"]:
        ctx = container["securityContext"]
        name = container["name"]
        assert ctx["runAsNonRoot"] is True, name
        assert ctx["readOnlyRootFilesystem"] is True, name
        assert ctx["allowPrivilegeEscalation"] is False, name
        assert ctx["capabilities"]["drop"] == ["ALL"], name
        assert not ctx.get("privileged"), name
        assert _volume_at(container, "/tmp").get("emptyDir") is not None, name


def test_liveness_is_the_process_and_readiness_adds_the_database() -> None:
    """A liveness probe that failed during a database outage would restart every replica, and
    kill their running jobs, over and over: only readiness may follow the database."""
    daemon = _container("runbroker")
    expected = {"startupProbe": HEALTH, "livenessProbe": HEALTH, "readinessProbe": READY}
    for probe, command in expected.items():
        assert daemon[probe]["exec"]["command"] == command, probe
        assert daemon[probe]["timeoutSeconds"] >= 2, probe


def test_socket_directory_is_an_empty_dir() -> None:
    volume = _volume_at(_container("runbroker"), "/run/runbroker")
    assert "emptyDir" in volume


def test_termination_grace_exceeds_the_shutdown_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        name: item["value"]
        for name, item in _env(_container("runbroker")).items()
        if "value" in item
    }
    url_file = tmp_path / "url"
    url_file.write_text("postgresql://u@db/x")
    env["RUNBROKER_DATABASE_URL_FILE"] = str(url_file)
    env["RUNBROKER_TASKS_FILE"] = str(tmp_path / "absent.toml")
    settings = settings_for(env, monkeypatch)
    grace_s = _pod()["terminationGracePeriodSeconds"]
    assert grace_s > settings.shutdown_timeout_s, (
        f"terminationGracePeriodSeconds {grace_s} must exceed RUNBROKER_SHUTDOWN_TIMEOUT"
        f" {settings.shutdown_timeout_s}s, or the kubelet SIGKILLs a clean drain"
    )
    assert settings.log_format == "json"


@pytest.mark.parametrize("container_name", ["migrate", "runbroker"])
def test_database_url_comes_from_the_secret_as_a_file(container_name: str) -> None:
    container = _container(container_name)
    env = _env(container)
    assert "RUNBROKER_DATABASE_URL" not in env, "the URL is read from a file, not the env"
    path = Path(env["RUNBROKER_DATABASE_URL_FILE"]["value"])
    volume = _volume_at(container, str(path.parent))
    secret = volume["secret"]
    items = {item["path"]: item["key"] for item in secret["items"]}
    key = items[path.name]
    # Readable by the daemon's group (fsGroup), by no one else.
    assert secret["defaultMode"] == 0o440
    assert _pod()["securityContext"]["fsGroup"] == RUNBROKER_UID
    example = k8s_resource("Secret", secret["secretName"])
    assert key in example["stringData"]


def test_migrations_run_before_the_daemon_in_every_pod() -> None:
    init = _pod()["initContainers"]
    assert [c["command"] for c in init] == [["runbroker", "migrate"]]
    assert init[0]["image"] == _container("runbroker")["image"]


def test_tasks_come_from_the_config_map_where_the_daemon_reads_them() -> None:
    daemon = _container("runbroker")
    tasks_path = Path(_env(daemon)["RUNBROKER_TASKS_FILE"]["value"])
    volume = _volume_at(daemon, str(tasks_path.parent))
    config_map = k8s_resource("ConfigMap", volume["configMap"]["name"])
    text = config_map["data"][tasks_path.name]
    tasks = parse_tasks_toml(text, "ConfigMap runbroker-tasks")
    assert "default" in tasks
    overrides = {"command", "args"} & set(daemon)
    assert not overrides, (
        "the image's ENTRYPOINT (runbroker run) starts the daemon; tasks come from the file"
    )
