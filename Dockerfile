# syntax=docker/dockerfile:1
#
# runbroker: a job-running daemon that is PID 1 of its container.
#
#   docker build -t runbroker .                  # the runtime image (the last stage)
#   docker build --target test -t runbroker:test .  # the image `docker compose run tests` uses
#
# Stages: `build` makes every wheel (runbroker's own and its dependencies'); `build-test` adds
# the test extra's; `test` installs those and the test suite; `runtime` installs only the runtime wheels,
# straight from the build stage through a bind mount, so neither wheels nor pip's cache nor any
# build tool ends up in a layer of the final image. Every dependency ships manylinux wheels for
# CPython 3.11 (amd64 and arm64), so no compiler is needed anywhere.
#
# The checks of this file: tests/static/test_dockerfile.py (hadolint with no finding allowed, and
# the structural facts below) and the container tier (tests/container: built and run on podman).
# The daemon's uid, 10001, appears in USER, in docker-compose.yml and in deploy/: the tests
# check that they all agree.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY daemon ./daemon
RUN pip wheel --wheel-dir /wheels/runtime .


FROM build AS build-test
RUN pip wheel --wheel-dir /wheels/test ".[test]"


FROM python:3.11-slim-bookworm AS test
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    RUNBROKER_TEST_BACKEND=local
# The acceptance suite makes the daemon PID 1 of a PID namespace (unshare) and enters it
# (nsenter, setpriv): util-linux, already in the base image. It runs as root, in a privileged
# container (see the `tests` service in docker-compose.yml); this stage is never deployed.
RUN --mount=type=bind,from=build-test,source=/wheels/test,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/*.whl
WORKDIR /src
COPY pyproject.toml ./
COPY tests ./tests
ENTRYPOINT ["python", "-m", "pytest"]
CMD ["tests/integration", "tests/acceptance"]


FROM python:3.11-slim-bookworm AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="runbroker" \
      org.opencontainers.image.description="A job-running daemon for containers: PID 1, one run queue, one executor, triggers over a unix socket, schedules in PostgreSQL." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim-bookworm"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
# Install the wheels, drop the packaging tools the daemon never uses, and create the user. /run
# is sticky and writable by all, as /tmp, and has no runbroker directory: without a mount the
# daemon makes its own socket directory there (0700), and a tmpfs mounted there
# (`--tmpfs /run/runbroker:mode=1777`) has the mode it is given on Docker and podman alike (over
# a directory of the image, runc before 1.1.8 would give it that directory's mode, and podman's
# copy of /run under --read-only drops the directory's write bits for others). The socket is
# owner-only from the moment it is bound, and both ends check the peer's uid.
RUN --mount=type=bind,from=build,source=/wheels/runtime,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/*.whl \
    && pip uninstall --yes setuptools wheel \
    && groupadd --system --gid 10001 runbroker \
    && useradd --system --no-log-init --uid 10001 --gid 10001 \
        --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin runbroker \
    && install -d -o root -g root -m 1777 /run \
    && install -d -o root -g root -m 0755 /etc/runbroker \
    && runbroker version
USER 10001:10001
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["runbroker", "health"]
ENTRYPOINT ["runbroker", "run"]
