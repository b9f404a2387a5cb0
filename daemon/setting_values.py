"""The values the daemon's settings may take: the field types and checks of ``daemon.settings``.

Pure functions of a value, so each rule is tested without an environment. Their messages
never repeat a secret.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from daemon.schedules.duration import parse_duration

MAX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes, the last a NUL


def _duration(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 90s, 1h30m or 250ms")
    return parse_duration(value.strip())


Duration = Annotated[float, BeforeValidator(_duration)]
"""Seconds, given as a Go-style duration (``90s``, ``1h30m``) or a number of seconds."""


_BYTE_UNITS = {"": 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_BYTE_SIZE = re.compile(r"([0-9]+)\s*([a-z]*)")


def _byte_size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _BYTE_SIZE.fullmatch(value.strip().lower()) if isinstance(value, str) else None
    if match is None or match[2] not in _BYTE_UNITS:
        raise ValueError("expected a size in bytes such as 1048576, 256KiB or 16MiB")
    return int(match[1]) * _BYTE_UNITS[match[2]]


ByteSize = Annotated[int, BeforeValidator(_byte_size)]
"""Bytes, given as a number or with a binary unit (``B``, ``KiB``, ``MiB``, ``GiB``)."""


def checked_socket_path(path: Path) -> Path:
    """``RUNBROKER_SOCKET``: absolute, and short enough to bind."""
    if not path.is_absolute():
        raise ValueError("must be an absolute path")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        limit = MAX_SOCKET_PATH_BYTES
        raise ValueError(f"is longer than the {limit} bytes a unix socket path may have")
    return path


def normalized_host_port(value: str | None) -> str | None:
    """``RUNBROKER_METRICS_ADDR``: ``host:port`` as the metrics server binds it (an IPv6 host in
    brackets, an empty host as 0.0.0.0), or None when unset or empty."""
    if value is None or value == "":
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError("expected host:port, for example 0.0.0.0:9464 or [::]:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal
    try:
        ipaddress.ip_address(host or "0.0.0.0")
    except ValueError:
        if not host.replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"{host!r} is neither an IP address nor a host name") from None
    if ":" in host:
        return f"[{host}]:{int(port)}"
    return f"{host or '0.0.0.0'}:{int(port)}"


# The query parameters a database URL may hold: asyncpg's own and the two of libpq's that the
# server takes at connection. asyncpg sends any other as a server setting at every connection,
# where an unknown name fails every one of them.
_URL_SCHEMES = ("postgresql", "postgres")
_URL_DRIVER_PARAMETERS = frozenset(
    {
        "host", "port", "dbname", "database", "user", "password", "passfile", "service",
        "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword",
        "sslnegotiation", "ssl_min_protocol_version", "ssl_max_protocol_version",
        "target_session_attrs", "krbsrvname", "gsslib", "application_name", "options",
    }
)  # fmt: skip
# libpq's parameters that the driver does not take: named as such in the refusal.
_URL_LIBPQ_ONLY = frozenset(
    {
        "hostaddr", "connect_timeout", "client_encoding", "fallback_application_name",
        "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
        "tcp_user_timeout", "replication", "gssencmode", "requiressl", "sslcompression",
        "sslcertmode", "sslcrldir", "sslsni", "requirepeer", "require_auth",
        "channel_binding", "gssdelegation", "load_balance_hosts",
    }
)  # fmt: skip
_URL_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslnegotiation": ("postgres", "direct"),
    "target_session_attrs": (
        "any",
        "primary",
        "standby",
        "read-write",
        "read-only",
        "prefer-standby",
    ),
    "gsslib": ("gssapi", "sspi"),
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
}
_IPV6_HOST = re.compile(r"\[([^\]]+)\](?::([^:]*))?")


def _port_problem(text: str) -> str | None:
    if not (text.isascii() and text.isdigit() and 0 < int(text) < 65536):
        return "the port is not a number from 1 to 65535"
    return None


def _host_problem(hostspec: str) -> str | None:
    """One entry of the URL's host list (``host``, ``host:port``, ``[v6]:port``, ``/socket``)."""
    if not hostspec:
        return "an empty host in the host list"
    if hostspec.startswith("/"):
        return None  # a unix socket directory
    if hostspec.startswith("["):
        match = _IPV6_HOST.fullmatch(hostspec)
        if match is None:
            return "an IPv6 host must be written [address] or [address]:port"
        try:
            ipaddress.IPv6Address(urllib.parse.unquote(match[1]).split("%")[0])
        except ValueError:
            return "the host in [...] is not an IPv6 address"
        port = match[2]
    else:
        _host, sep, port = hostspec.partition(":")
        if not sep:
            return None
    if port is None or port == "":
        return None
    return _port_problem(urllib.parse.unquote(port))


def _parameter_problem(name: str) -> str | None:
    if name in _URL_DRIVER_PARAMETERS:
        return None
    shown = name[:40]
    if name in _URL_LIBPQ_ONLY:
        return f"its parameter {shown!r} is libpq's, which the driver (asyncpg) does not take"
    return (
        f"its parameter {shown!r} is unknown (the driver takes host, port, dbname, user, "
        "password, passfile, service, sslmode and the other ssl* parameters, "
        "target_session_attrs, krbsrvname, gsslib, application_name, options; server settings "
        "go in options=-c NAME=VALUE)"
    )


def database_url_problem(url: str) -> str | None:
    """Why the driver could not use ``url``, or None. Checks the form only (scheme, hosts,
    ports, the query parameters: only those the driver knows), not whether the database is there: a
    database that is down or missing is an outage the daemon waits out. The message never
    repeats the user name or password."""
    if not url.strip():
        return "is empty"
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return "is not a valid URL (for example an unclosed [ in an IPv6 host)"
    if parts.scheme not in _URL_SCHEMES:
        return "expected a URL such as postgresql://USER:PASSWORD@HOST:5432/DATABASE" + (
            f" (the scheme must be postgresql or postgres, not {parts.scheme[:20]!r})"
            if parts.scheme
            else ""
        )
    hostlist = parts.netloc.partition("@")[2] if "@" in parts.netloc else parts.netloc
    if hostlist:
        for hostspec in hostlist.split(","):
            if (problem := _host_problem(hostspec)) is not None:
                return problem
    if parts.query:
        try:
            query = urllib.parse.parse_qs(parts.query, strict_parsing=True)
        except ValueError:
            return "its query string is not a list of name=value parameters"
        for name, values in query.items():
            if (problem := _parameter_problem(name)) is not None:
                return problem
            value = values[-1]
            if name == "port":
                for port in value.split(","):
                    if (problem := _port_problem(port)) is not None:
                        return problem
            choices = _URL_CHOICES.get(name)
            if choices is not None and value not in choices:
                return f"{name} must be one of {', '.join(choices)}"
    return None
