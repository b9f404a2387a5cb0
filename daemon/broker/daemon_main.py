"""Start-up of ``runbroker run``: validate everything, then hand over to the event loop.

A bad setting or tasks file is one line on stderr naming the culprit and exit code 2, with
nothing started (no socket, no database connection). The tasks file is checked by
``tasks_check``, the one check ``runbroker check`` and every reload apply too.
"""

from __future__ import annotations

import sys

from daemon.broker.tasks_check import startup_tasks
from daemon.exits import EXIT_CONFIG, EXIT_FATAL
from daemon.log.logs import configure_logging, get_logger
from daemon.settings import SettingsError, load_settings, nearest_setting, unknown_variables
from daemon.taskfile import TaskConfigError


def main(command: list[str], early_signals: list[int]) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    log = get_logger("runbroker.main")
    for name in unknown_variables():
        nearest = nearest_setting(name)
        if nearest is None:
            log.warning("settings.unknown_variable", variable=name)
        else:
            log.warning("settings.unknown_variable", variable=name, did_you_mean=nearest)
    default_command = tuple(command)  # the command after '--' wins over RUNBROKER_COMMAND
    if not default_command:
        try:
            default_command = settings.default_command()
        except ValueError as exc:
            print(f"runbroker: RUNBROKER_COMMAND: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    try:
        tasks, taken = startup_tasks(settings, default_command)
    except TaskConfigError as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    import uvloop

    from daemon.broker.app import run_broker
    from daemon.broker.looprun import run_loop
    from daemon.broker.workdir import leave_start_directory
    from daemon.core.subreaper import MODE_NONE, adopt_orphans
    from daemon.server.server import SocketInUse

    reaper = adopt_orphans()  # before any job can leave an orphan
    job_dir = leave_start_directory()  # every path is absolute by now
    log.info("broker.starting", tasks=sorted(tasks.names()), reaper=reaper)
    if reaper == MODE_NONE:
        log.warning("broker.not_reaping", reason="not PID 1 and PR_SET_CHILD_SUBREAPER refused")
    try:
        main = run_broker(settings, tasks, early_signals, reaper, default_command, job_dir, taken)
        return int(run_loop(main, uvloop.new_event_loop))
    except SettingsError as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SocketInUse as exc:
        log.error("broker.socket_in_use", error=str(exc))
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_FATAL
    except Exception:
        log.exception("broker.fatal")
        return EXIT_FATAL
