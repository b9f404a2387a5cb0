"""The container engine of the container test tier: Debian's podman, run as root, configured by
files of this repository and driven through its Docker-compatible API by docker-compose.

``python -m tests.support.podman_engine setup`` (run by scripts/test-container) makes it
ready, idempotently, from nothing but Debian's archive and this repository:

1. the engine's packages (podman, runc, netavark, aardvark-dns, iptables, mmdebstrap), with
   apt-get, when one is missing;
2. podman's configuration: the files in tests/container/engine/, rendered with this machine's
   limits and the state directory, selected by ``CONTAINERS_CONF``,
   ``CONTAINERS_STORAGE_CONF`` and ``CONTAINERS_REGISTRIES_CONF`` (the machine's own
   /etc/containers is never changed; podman still reads its signature policy and short-name
   aliases there);
3. the base images: no registry is reachable, so two Debian bookworm root filesystems are made
   with mmdebstrap (cached as tar files keyed by their inputs) and imported, and the stand-ins
   the Dockerfile and docker-compose.yml name (``python:3.11-slim-bookworm``,
   ``postgres:15-bookworm``) are built on them from tests/container/engine/*.Containerfile;
4. the project's images ``runbroker:dev`` (target ``runtime``) and ``runbroker:test`` (target
   ``test``), from the unchanged Dockerfile, in Docker's image format (the OCI format drops
   HEALTHCHECK), with podman's layer cache.

Everything lives in the state directory ``RUNBROKER_ENGINE_DIR`` (default
``$XDG_CACHE_HOME/runbroker-engine``, else ``~/.cache/runbroker-engine``): the rendered
configuration, the image store, the root filesystem tars. Removing it starts from nothing.

The tier itself (tests/container/conftest.py) starts ``podman system service`` on a socket of
its own for docker-compose (``DOCKER_HOST``, ``DOCKER_BUILDKIT=0``) and runs the health checks
that systemd timers would run under Docker-less podman (there is no systemd here).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import http.client
import io
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.eventually import eventually

REPO = Path(__file__).resolve().parents[2]
ENGINE_FILES = REPO / "tests" / "container" / "engine"
PODMAN_OVERRIDE = REPO / "tests" / "container" / "compose.podman.yml"

PACKAGES = ("podman", "runc", "netavark", "aardvark-dns", "iptables", "mmdebstrap")
SUITE = "bookworm"
PYTHON_IMAGE = "docker.io/library/python:3.11-slim-bookworm"
POSTGRES_IMAGE = "docker.io/library/postgres:15-bookworm"
# What `image: runbroker:dev` means to Docker, and so to podman's compat API.
RUNTIME_IMAGE = "docker.io/library/runbroker:dev"
TEST_IMAGE = "docker.io/library/runbroker:test"

# Each base root filesystem: its name and the Debian packages on top of the minbase variant.
ROOTFS: dict[str, tuple[str, ...]] = {
    "python": ("python3", "python3-venv", "ca-certificates", "netbase", "tzdata"),
    "postgres": ("postgresql-15", "netbase", "tzdata"),
}

COMMAND_TIMEOUT_S = 900.0  # an apt-get, an mmdebstrap or an image build
SERVICE_START_S = 30.0


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("RUNBROKER_ENGINE_DIR"):
        return Path(env["RUNBROKER_ENGINE_DIR"]).resolve()
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "/root")) / ".cache")
    return Path(cache).resolve() / "runbroker-engine"


def engine_env(state: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment podman (and docker-compose, once a service runs) is used with."""
    env = dict(os.environ if base is None else base)
    env["CONTAINERS_CONF"] = str(state / "conf" / "containers.conf")
    env["CONTAINERS_STORAGE_CONF"] = str(state / "conf" / "storage.conf")
    env["CONTAINERS_REGISTRIES_CONF"] = str(ENGINE_FILES / "registries.conf")
    return env


HEARTBEAT_S = 30.0
"""How often a long set-up step says it is still at work: a silent CI is a stuck-looking one."""


def log(message: str) -> None:
    print(f"engine: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def step(what: str, heartbeat_s: float = HEARTBEAT_S) -> Iterator[None]:
    """Say that ``what`` starts, that it is still going every ``heartbeat_s``, and when it ended."""
    started = time.monotonic()
    ended = threading.Event()

    def beat() -> None:
        while not ended.wait(heartbeat_s):
            log(f"still {what} ({time.monotonic() - started:.0f} s)")

    log(f"{what} ...")
    beater = threading.Thread(target=beat, name="engine-heartbeat", daemon=True)
    beater.start()
    try:
        yield
    finally:
        ended.set()
        beater.join()
    log(f"{what}: done in {time.monotonic() - started:.1f} s")


def run(
    argv: Sequence[str | Path],
    env: Mapping[str, str] | None = None,
    timeout_s: float = COMMAND_TIMEOUT_S,
    capture: bool = False,
) -> str:
    """Run a set-up command; its output goes to stderr unless captured. A failure raises."""
    result = subprocess.run(
        [str(part) for part in argv],
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture else sys.stderr,
        stderr=subprocess.PIPE if capture else sys.stderr,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        detail = result.stderr if capture else "(see above)"
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {result.returncode}: {detail}")
    return result.stdout if capture else ""


# -- 1. packages -------------------------------------------------------------------------------


def missing_packages(names: Sequence[str] = PACKAGES) -> list[str]:
    result = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\n", *names],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    installed = {
        line.split()[0] for line in result.stdout.splitlines() if line.endswith(" installed")
    }
    return [name for name in names if name not in installed]


def install_packages() -> None:
    missing = missing_packages()
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with step(f"installing {' '.join(missing)} from Debian's archive"):
        run(["apt-get", "update", "-qq"], env=env)
        run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
            env=env,
        )


# -- 2. configuration --------------------------------------------------------------------------


def hard_limits() -> tuple[int, int]:
    """(nofile, nproc): the hard limits podman runs under, nproc capped at kernel.pid_max."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if nproc == resource.RLIM_INFINITY or nproc > pid_max:
        nproc = pid_max
    if nofile == resource.RLIM_INFINITY:
        nofile = 1 << 20
    return nofile, nproc


def render(template: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        template = template.replace(f"@{name}@", value)
    if "@" in "".join(line.split("#")[0] for line in template.splitlines()):
        raise ValueError("a placeholder of the engine configuration was left unfilled")
    return template


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def configure(state: Path) -> None:
    nofile, nproc = hard_limits()
    values = {
        "STATE": str(state),
        "RUN": str(state / "run"),
        "NOFILE": str(nofile),
        "NPROC": str(nproc),
    }
    for name in ("containers.conf", "storage.conf"):
        text = render((ENGINE_FILES / f"{name}.in").read_text(), values)
        write_if_changed(state / "conf" / name, text)
    # podman's run-time state (runroot, tmp_dir) must not outlive a reboot, as it would not
    # on a tmpfs: it is kept on disk with the boot it belongs to, and dropped after another.
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    marker = state / "run" / "boot_id"
    if marker.exists() and marker.read_text().strip() != boot_id:
        shutil.rmtree(state / "run")
    (state / "run").mkdir(parents=True, exist_ok=True)
    marker.write_text(boot_id + "\n")
    for sub in ("networks", "volumes", "storage"):
        (state / sub).mkdir(parents=True, exist_ok=True)


# -- 3. base images ----------------------------------------------------------------------------


def mmdebstrap_argv(packages: Sequence[str], out: Path) -> list[str]:
    return [
        "mmdebstrap",
        "--quiet",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        "--format=tar",
        SUITE,
        str(out),
    ]


def rootfs_key(name: str) -> str:
    """What a root filesystem tar is made from: the command line and mmdebstrap's version."""
    version = run(["dpkg-query", "--show", "--showformat=${Version}", "mmdebstrap"], capture=True)
    inputs = {"argv": mmdebstrap_argv(ROOTFS[name], Path("OUT")), "mmdebstrap": version}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def podman(state: Path, *args: str | Path, capture: bool = False) -> str:
    return run(["podman", *args], env=engine_env(state), capture=capture)


def image_exists(state: Path, name: str) -> bool:
    result = subprocess.run(
        ["podman", "image", "exists", name],
        env=engine_env(state),
        capture_output=True,
        timeout=60,
        check=False,
    )
    return result.returncode == 0


def rootfs_tar(state: Path, name: str) -> Path:
    """The root filesystem tar ``name``, made with mmdebstrap unless cached for its key."""
    key = rootfs_key(name)
    cache = state / "rootfs"
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / f"{name}-{key}.tar"
    if not tar.exists():
        for stale in cache.glob(f"{name}-*.tar*"):
            stale.unlink()
        partial = tar.with_suffix(".tar.partial")
        with step(f"making the {name} root filesystem with mmdebstrap"):
            run(mmdebstrap_argv(ROOTFS[name], partial))
        partial.rename(tar)
    return tar


def base_images(state: Path) -> dict[str, str]:
    """Each root filesystem imported as an image (made when missing; the mmdebstrap runs go
    side by side: they mostly wait for downloads and the disk)."""
    tags = {name: f"localhost/runbroker-engine/{name}-rootfs:{rootfs_key(name)}" for name in ROOTFS}
    missing = [name for name, tag in tags.items() if not image_exists(state, tag)]
    with ThreadPoolExecutor(max_workers=len(ROOTFS)) as pool:
        tars = dict(
            zip(missing, pool.map(lambda name: rootfs_tar(state, name), missing), strict=True)
        )
    for name, tar in tars.items():
        with step(f"importing the {name} root filesystem"):
            podman(state, "import", "--quiet", tar, tags[name])
    return tags


def pip_conf(environ: Mapping[str, str] | None = None, host_conf: Path | None = None) -> str:
    """pip.conf for the python stand-in: the host's (when it has one), the index the host's
    environment names, and ``cert`` pointing at the image's system bundle."""
    env = os.environ if environ is None else environ
    conf = configparser.ConfigParser(interpolation=None)
    host = Path("/etc/pip.conf") if host_conf is None else host_conf
    if host.is_file():
        conf.read(host)
    if not conf.has_section("global"):
        conf.add_section("global")
    for var, key in (("PIP_INDEX_URL", "index-url"), ("PIP_EXTRA_INDEX_URL", "extra-index-url")):
        if env.get(var):
            conf.set("global", key, env[var])
    conf.set("global", "cert", "/etc/ssl/certs/ca-certificates.crt")
    out = io.StringIO()
    conf.write(out)
    return out.getvalue()


def python_context(state: Path) -> Path:
    context = state / "context" / "python"
    certs = context / "ca-certificates"
    if certs.exists():
        shutil.rmtree(certs)
    certs.mkdir(parents=True)
    host_certs = Path("/usr/local/share/ca-certificates")
    if host_certs.is_dir():
        for cert in sorted(host_certs.rglob("*.crt")):
            shutil.copyfile(cert, certs / cert.name)
    (certs / ".keep").write_text("")
    write_if_changed(context / "pip.conf", pip_conf())
    return context


def build(state: Path, containerfile: Path, tag: str, context: Path, *extra: str) -> None:
    with step(f"building {tag}"):
        podman(
            state, "build", "--quiet", "--format", "docker", "--layers", "--file", containerfile,
            "--tag", tag, *extra, context,
        )  # fmt: skip


def stand_ins(state: Path) -> None:
    bases = base_images(state)
    build(
        state, ENGINE_FILES / "python.Containerfile", PYTHON_IMAGE, python_context(state),
        "--build-arg", f"BASE={bases['python']}",
    )  # fmt: skip
    build(
        state, ENGINE_FILES / "postgres.Containerfile", POSTGRES_IMAGE, ENGINE_FILES,
        "--build-arg", f"BASE={bases['postgres']}",
    )  # fmt: skip


# -- 4. the project's images -------------------------------------------------------------------


def project_images(state: Path) -> None:
    dockerfile = REPO / "Dockerfile"
    # No layer cache: podman 4.3 reused the `COPY daemon` layer of an older source tree (the
    # .dockerignore allow-list, `*` then `!daemon/`, seems to keep changed files out of the
    # cache key), and the tier tested a stale daemon. A fresh build costs about a minute.
    build(state, dockerfile, RUNTIME_IMAGE, REPO, "--target", "runtime", "--no-cache")
    build(state, dockerfile, TEST_IMAGE, REPO, "--target", "test", "--no-cache")
    # What rebuilds left without a name a day ago or more: the build stages' layers are such
    # images too, and the next build reuses them, so recent ones are kept.
    podman(state, "image", "prune", "--force", "--filter", "until=24h", capture=True)


# The compose project names the tier gives (tests/container/conftest.py, the acceptance
# suite's compose backend).
TIER_PROJECTS = ("rbct-", "rbtest-")


def remove_leftovers(state: Path) -> None:
    """What an interrupted run of the tier left in the engine: its compose projects'
    containers, volumes and networks (runs hold a lock, so none is in use now)."""
    fmt = '{{.ID}} {{index .Labels "com.docker.compose.project"}}'
    listed = podman(state, "ps", "--all", "--format", fmt, capture=True)
    containers = [
        line.split()[0]
        for line in listed.splitlines()
        if len(line.split()) == 2 and line.split()[1].startswith(TIER_PROJECTS)
    ]
    if containers:
        log(f"removing {len(containers)} containers an interrupted run left")
        podman(state, "rm", "--force", "--volumes", *containers, capture=True)
    for kind in ("volume", "network"):
        names = podman(state, kind, "ls", "--format", "{{.Name}}", capture=True).split()
        stale = [name for name in names if name.startswith(TIER_PROJECTS)]
        if stale:
            podman(state, kind, "rm", "--force", *stale, capture=True)


def setup(state: Path) -> None:
    started = time.monotonic()
    install_packages()
    configure(state)
    remove_leftovers(state)
    log(f"packages and configuration ready in {time.monotonic() - started:.1f} s")
    stand_ins(state)
    project_images(state)
    log(f"set up in {time.monotonic() - started:.1f} s (state in {state})")


# -- the API service and the health checks -----------------------------------------------------


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        sock.connect(str(self._path))
        self.sock = sock


def ping(path: Path) -> bool:
    connection = _UnixHTTPConnection(path)
    try:
        connection.request("GET", "/_ping")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


@contextlib.contextmanager
def api_service(state: Path) -> Iterator[dict[str, str]]:
    """``podman system service`` on a socket of this run; yields docker-compose's
    environment (the engine's, ``DOCKER_HOST``, ``DOCKER_BUILDKIT=0``)."""
    sockets = state / "run" / "api"
    sockets.mkdir(parents=True, exist_ok=True)
    path = sockets / f"{os.getpid()}.sock"
    path.unlink(missing_ok=True)  # a socket of a run that was killed
    env = engine_env(state)
    log_file = (state / "run" / "api.log").open("wb")  # the last run's
    proc = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{path}"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )

    def answering() -> bool:
        if ping(path):
            return True
        if proc.poll() is not None:
            raise RuntimeError(f"podman system service exited {proc.returncode}")
        return False

    try:
        # Nothing tells us when the socket starts answering.
        eventually(
            answering,
            "podman system service to answer on its socket",
            timeout_s=SERVICE_START_S,
            every_s=0.1,
        )
        env["DOCKER_HOST"] = f"unix://{path}"
        env["DOCKER_BUILDKIT"] = "0"
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log_file.close()
        path.unlink(missing_ok=True)


class HealthChecks:
    """Runs ``podman healthcheck run`` for every running container of the compose projects it
    is told about, once a second: what podman's systemd timers do where systemd runs. Without
    it no health check runs here, and ``depends_on: service_healthy`` waits forever."""

    def __init__(self, env: Mapping[str, str], period_s: float = 1.0) -> None:
        self.env = dict(env)
        self.period_s = period_s
        self.projects: set[str] = set()
        self.checks = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="healthchecks", daemon=True)

    def watch(self, project: str) -> None:
        with self._lock:
            self.projects.add(project)

    def forget(self, project: str) -> None:
        with self._lock:
            self.projects.discard(project)

    def __enter__(self) -> HealthChecks:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _containers(self, project: str) -> list[str]:
        result = subprocess.run(
            ["podman", "ps", "--filter", f"label=com.docker.compose.project={project}",
             "--format", "{{.ID}} {{.Status}}"],
            env=self.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        # Status ends in (starting), (healthy) or (unhealthy) when there is a health check.
        return [
            line.split()[0]
            for line in result.stdout.splitlines()
            if line.rstrip().endswith(("(starting)", "(healthy)", "(unhealthy)"))
        ]

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            with self._lock:
                projects = sorted(self.projects)
            for project in projects:
                for container in self._containers(project):
                    subprocess.run(
                        ["podman", "healthcheck", "run", container],
                        env=self.env, capture_output=True, timeout=60, check=False,
                    )  # fmt: skip
                    self.checks += 1


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["state-dir"]:
        print(state_dir())
        return 0
    if list(argv) != ["setup"]:
        print("usage: python -m tests.support.podman_engine setup|state-dir", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("the container tier runs podman as root: run it as root", file=sys.stderr)
        return 2
    setup(state_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
