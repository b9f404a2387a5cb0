"""Composition root: wires queue, executor, socket server, ticker, reaper and watchdog and (with
a database) the Postgres runner, runs them in one TaskGroup until a stop signal, then shuts them
down in order within ``RUNBROKER_SHUTDOWN_TIMEOUT`` (``daemon.broker.shutdown``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from daemon.broker.engine import Engine
from daemon.broker.gctune import tune_gc
from daemon.broker.operations import OPERATIONS
from daemon.broker.reload.asking import Answer
from daemon.broker.reload.reloader import TaskReloader
from daemon.broker.reload.waking import reload_forever, start_watching
from daemon.broker.shutdown import shutdown
from daemon.broker.signals import Signals, report_signals, signal_name
from daemon.broker.tasks_check import TakenTasks
from daemon.broker.ticking import tick_plans
from daemon.core import subreaper
from daemon.core.journal import Journal
from daemon.core.process.watchdog import watchdog_protects
from daemon.core.runqueue import Run
from daemon.core.strays import Stray
from daemon.core.tasks import TaskRegistry
from daemon.core.ticker.busy import BusyPolicy
from daemon.core.ticker.slot_state import SlotState, StateDirRefused
from daemon.core.ticker.slots import SlotRecord
from daemon.core.ticker.ticker import Ticker
from daemon.exits import EXIT_FATAL
from daemon.log.logs import get_logger
from daemon.notify.notifier import Notifier
from daemon.observe import status
from daemon.server.server import SocketServer
from daemon.settings import Settings, SettingsError
from daemon.wire.protocol import AnsweredRequest

if TYPE_CHECKING:
    from daemon.observe.metrics_http import MetricsServer
    from daemon.pg.runner import PgRunner

log = get_logger("runbroker.app")

RECENT_RESULTS = 20


class Broker:
    def __init__(
        self,
        settings: Settings,
        tasks: TaskRegistry,
        signals: Signals,
        reaper_mode: str = subreaper.MODE_NONE,
        default_command: tuple[str, ...] = (),
        job_dir: str | None = None,
        taken: TakenTasks | None = None,
    ) -> None:
        """``tasks`` is the one registry every part shares, whose contents a reload swaps.

        ``default_command`` is the command line's task ``default``, kept across reloads.
        ``job_dir`` is where commands start (None: the daemon's own directory). ``taken``: the
        start's check of ``tasks``, whose ticker plans are used as they are (None: made here)."""
        self.settings = settings
        self.reaper_mode = reaper_mode  # how orphans reach the reaper (daemon.core.subreaper)
        self.tasks = tasks
        self.signals = signals
        self.journal = Journal(
            settings.output_run_bytes, settings.output_history_runs, settings.output_history_bytes
        )
        engine = Engine.for_daemon(settings, tasks, self.journal, job_dir)
        self.queue, self.children, self.executor = engine.queue, engine.children, engine.executor
        busy = BusyPolicy(self.queue, self.executor.cancel_current)
        self.slots = SlotRecord()
        self.server = SocketServer(
            settings.socket,
            self.queue,
            tasks,
            self.control,
            request_deadline_s=settings.request_timeout_s,
            journal=self.journal,
            max_connections=settings.max_connections,
            busy=busy,
        )
        if taken is None:
            plans, self.interval_warnings = tick_plans(settings, tasks)
        else:
            plans, self.interval_warnings = taken.plans, taken.warnings
        self.slot_state = None if settings.state_dir is None else SlotState(settings.state_dir)
        self.ticker = Ticker(
            self.queue,
            plans,
            jitter=settings.jitter,
            slots=self.slots,
            busy=busy,
            state=self.slot_state,
        )
        self.reloader = TaskReloader(settings, tasks, self.ticker, default_command)
        self.recent: collections.deque[Run] = collections.deque(maxlen=RECENT_RESULTS)
        self.journal.recent = self.recent  # what `logs` says of runs without lines
        self.started_at = time.time()
        self.pgrunner: PgRunner | None = None  # with a database, from serve() on
        self.queue.on_finish(self._finished)
        self.notifier = Notifier(tasks, self.journal, self.children)
        self.queue.on_finish(self.notifier.run_finished)
        self.queue.on_submit(self.notifier.run_submitted)
        self.reloader.listeners.add(self.notifier.refresh)
        self.metrics_server: MetricsServer | None = None
        if settings.metrics_addr:
            from daemon.observe.metrics import Metrics  # prometheus only when asked
            from daemon.observe.metrics_http import MetricsServer

            metrics = Metrics(
                self.queue,
                lambda: self.pgrunner,
                tasks=sorted(tasks.names()),
                plans=lambda: self.ticker.plans,
                notify=self.notifier,
                state=self.slot_state,
            )
            self.queue.on_finish(metrics.run_finished)
            self.slots.listeners.add(metrics.slot_settled)
            # prometheus_client's metrics take their own locks: new series are added off the loop.
            self.reloader.listeners_off_loop.add(lambda changes: metrics.add_tasks(changes.added))
            self.reloader.outcomes.add(metrics.reload_done)
            self.metrics_server = MetricsServer(
                metrics, settings.metrics_addr, lambda: status.health_problem(self)
            )

    @property
    def strays(self) -> list[Stray]:
        """The handlers the executor gave up on that still run (``status``, ``health``)."""
        return self.executor.strays.listed()

    def _finished(self, run: Run) -> None:
        self.recent.appendleft(run)

    def control(self, request: AnsweredRequest) -> Mapping[str, Any] | Answer:
        """A control request's answer (``operations``); a reload's (and a dry run's) later, as
        the reload loop makes them one at a time (``reload.asking``)."""
        return OPERATIONS[type(request)](self, request)

    async def serve(self) -> int:
        """Run until a signal, and return the process's exit code."""
        for warning in self.interval_warnings:
            log.warning("settings.interval", warning=warning)
        if self.metrics_server is not None:  # first: a bad address is a setting's fault
            try:
                await self.metrics_server.start()
            except OSError as exc:
                raise SettingsError(
                    f"RUNBROKER_METRICS_ADDR: cannot listen on {self.settings.metrics_addr}: "
                    f"{exc.strerror or exc}"
                ) from None
        self._open_state()
        await self.server.start()
        database = None
        if self.settings.database_dsn():
            from daemon.pg.fence import graces_s
            from daemon.pg.runner import PgRunner  # only with a database
            from daemon.pg.store.postgres import PostgresStore

            database = PostgresStore(self.settings.database_dsn() or "")
            self.pgrunner = PgRunner(
                store=database,
                queue=self.queue,
                settings=self.settings,
                known_tasks=self.tasks,  # the shared registry: a reload is seen at once
                dependency_wait_s=self.settings.dependency_wait_s,
                cancel_running=self.executor.cancel_current,
                fence_grace_s=max(graces_s(self.settings.grace_s, self.tasks.graces_s()).values()),
                backstop=self.children.watchdog,
            )
            self.reloader.fence_widen = self.pgrunner.widen_fence
        watcher = start_watching(self.reloader)
        try:
            return await self._serve(database is not None)
        finally:
            if watcher is not None:
                watcher.close()

    def _open_state(self) -> None:
        """Read the state directory before anything ticks; one in use by another daemon is a
        setting's fault, a file that is not ours is set aside and said once."""
        state = self.slot_state
        if state is None:
            return
        try:
            loaded = state.open()
        except StateDirRefused as exc:
            raise SettingsError(str(exc)) from None
        if loaded.problem:
            log.error("state.refused", problem=loaded.problem)
        state.forget({plan.task for plan in self.ticker.plans})
        self.notifier.keep_failing_in(state)

    async def _serve(self, database: bool) -> int:
        watchdog = watchdog_protects(
            pid1=self.reaper_mode == subreaper.MODE_PID1, database=database
        )
        log.info(
            "broker.ready",
            socket=str(self.settings.socket),
            tasks=sorted(self.tasks.names()),
            pid=os.getpid(),
            database=database,
            watchdog=watchdog,
        )
        tune_gc()  # start-up is over: what it made is frozen
        pg_stopping = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            force_task = group.create_task(self._force_exit_watch())
            executor_task = group.create_task(self.executor.run_forever())
            ticker_task = group.create_task(self.ticker.run())
            reload_task = group.create_task(reload_forever(self.reloader, self.signals.reload))
            reaper_task = group.create_task(self.children.guard_forever(watchdog=watchdog))
            group.create_task(self.notifier.run())  # ends in shutdown's notify_drain
            pg_task = None
            if self.pgrunner is not None:
                pg_task = group.create_task(self.pgrunner.run(pg_stopping))
            signals_task = group.create_task(
                report_signals(self.signals, lambda: status.status_answer(self))
            )
            state_task = None
            if self.slot_state is not None:
                state_task = group.create_task(self.slot_state.keep_written())
            await self.signals.stop.wait()
            reload_task.cancel()  # first: no reload replaces the plans of a stopping ticker
            log.info("broker.stop_signal", signal=signal_name(self.signals.stop_signal))

            def stop_producers() -> None:
                ticker_task.cancel()
                pg_stopping.set()

            code = await shutdown(
                self.settings.shutdown_timeout_s,
                server=self.server,
                queue=self.queue,
                executor=self.executor,
                children=self.children,
                executor_task=executor_task,
                others=[ticker_task] + ([pg_task] if pg_task is not None else []),
                close_more=None if self.metrics_server is None else self.metrics_server.close,
                stop_producers=stop_producers,
                notify_drain=self.notifier.drain,
            )
            for task in (reaper_task, force_task, signals_task):
                task.cancel()
            if state_task is not None:  # the ticker has stopped: its last slots are written
                state_task.cancel()
        if self.slot_state is not None:
            self.slot_state.close()
        return code

    async def _force_exit_watch(self) -> None:
        await self.signals.force.wait()
        log.warning("broker.forced_exit")
        self.children.kill_all()
        os._exit(EXIT_FATAL)


async def run_broker(
    settings: Settings,
    tasks: TaskRegistry,
    early_signals: list[int],
    reaper_mode: str = subreaper.MODE_NONE,
    default_command: tuple[str, ...] = (),
    job_dir: str | None = None,
    taken: TakenTasks | None = None,
) -> int:
    """Serve until a stop signal, and return the exit code.

    ``early_signals`` are those that came during start-up. ``reaper_mode`` is what
    ``subreaper.adopt_orphans`` answered; ``taken``, what ``startup_tasks`` took."""
    signals = Signals()
    signals.install(asyncio.get_running_loop())
    for signum in early_signals:
        signals.received(signum)
    broker = Broker(settings, tasks, signals, reaper_mode, default_command, job_dir, taken)
    return await broker.serve()
