"""The long help texts of ``runbroker run``, ``trigger``, ``reload``, ``logs``, ``next`` and
``check``: what a user reads in ``--help``, kept apart from the parser that shows them
(``parser``)."""

TRIGGER_HELP = """\
TASK is a task the container defines: `default` (the command given to `runbroker run`, or
RUNBROKER_COMMAND) or one of the tasks file (RUNBROKER_TASKS_FILE). An unknown task is refused
with the list of the tasks defined. The run's output is shown as it comes (its stdout on
stdout, its stderr and runbroker's own lines on stderr); a run goes on if this client stops
waiting.

--arg and --env are refused unless the task allows them: `allow_args = true` appends every
--arg to its command, `allow_env = ["NAME", ...]` lists the names --env may set.

exit codes:
  0    the run succeeded
  1    the run failed or was cancelled
  2    usage error, or a request the daemon refuses (unknown task, args or env not allowed)
  3    skipped: the task has a run queued or running and its on_busy is "skip"
  69   the daemon is unreachable (RUNBROKER_SOCKET), or refuses this user
  75   rejected: the run queue is full, the daemon is busy or shutting down; retry later
  124  --timeout passed: gave up waiting; the run goes on
  130  interrupted (Ctrl-C); the run goes on
  141  the reader of the output went away (| head); the run goes on

examples:
  runbroker trigger                      run `default`
  runbroker trigger report --arg 2026-01 --env REPORT_DAY=mon
  runbroker trigger backup --detach      print the run id once it is queued
"""

RELOAD_HELP = """\
The daemon re-reads its tasks file (SIGHUP and a change of the file on disk do the same). The
new file is taken whole or not at all: one that does not parse or validate is refused, the
tasks stay as they were, and `status` and `health` say the last reload failed. Runs already
queued or running go on; a queued run of a task the file removed ends with a failed result
saying so. RUNBROKER_* settings are not reloaded (restart the daemon to change them).

With --dry-run the daemon reads and checks the file the same way but changes nothing: it
prints the tasks a reload would add, remove and change, and how each one's next planned time
moves (a task whose timing is unchanged keeps its next time; a new or changed one starts from
the reload, without a start-up tick). With --dry-run --file PATH, the same of the file at
PATH (read by this command, at most 1 MiB) against the tasks the daemon runs now: a file can
be previewed before it is put in the watched place, where it would be reloaded at once.

exit codes:
  0    reloaded (the tasks added, removed, changed and unchanged are printed);
       --dry-run: the file would be taken (the plan is printed)
  1    refused: the file is wrong (the old tasks stay), or there is no tasks file
  2    the daemon is older than this client and does not know the request
  69   the daemon is unreachable (RUNBROKER_SOCKET), or refuses this user
  75   the daemon is shutting down

examples:
  runbroker reload --dry-run             what a reload of the edited file would do
  runbroker reload --dry-run --file new.toml
                                         what a reload would do if new.toml were the file
"""

LOGS_HELP = """\
Which run: RUN_ID (r<hex>-<n>, as trigger and status show it), running or one of the last
finished ones the daemon keeps (RUNBROKER_OUTPUT_HISTORY_RUNS); TASK, its running run, else
its latest finished one; nothing, the running run, else the latest finished one. A run keeps
its last RUNBROKER_OUTPUT_RUN_BYTES of output: earlier lines are dropped, and counted.

exit codes:
  0    printed (with --follow: the run succeeded)
  1    with --follow: the run failed or was cancelled
  2    no such run (or task), or a usage error
  69   the daemon is unreachable, or refuses this user
  130  interrupted (Ctrl-C); the run goes on

examples:
  runbroker logs                         the running run, else the latest finished one
  runbroker logs report -f               follow the task report's run until it ends
  runbroker logs --runs 10               the last 10 finished runs: id, task, outcome, ...
"""

RUN_HELP = """\
COMMAND ARGS after `--` (or RUNBROKER_COMMAND) is the task `default`; more tasks come from
the tasks file. The daemon ticks `default` at RUNBROKER_INTERVAL, serves `runbroker trigger`
on RUNBROKER_SOCKET and, with RUNBROKER_DATABASE_URL, runs the scheduled jobs of PostgreSQL.

settings (environment variables; each is validated at start: a bad one is one line naming
it and exit 2, nothing started; an unknown RUNBROKER_* variable is warned about):
  RUNBROKER_INTERVAL          default's ticker: a duration (50ms..720h), off, or 0 (once);
                              empty: RUNBROKER_DEFAULT_INTERVAL
  RUNBROKER_DEFAULT_INTERVAL  cadence when INTERVAL is empty or invalid (1h)
  RUNBROKER_JITTER            ticks move by up to this fraction of the interval (0.1)
  RUNBROKER_FIRE_ON_START     interval tickers fire once at start (true)
  RUNBROKER_COMMAND           the task `default`, split like a shell would
  RUNBROKER_TASKS_FILE        TOML tasks file (/etc/runbroker/tasks.toml, optional)
  RUNBROKER_SOCKET            the owner-only unix socket (/run/runbroker/runbroker.sock)
  RUNBROKER_LOCK_DIR          flock files of `runbroker once` (the socket's directory)
  RUNBROKER_STATE_DIR         each task's last planned slot, for catch-up after a restart (unset)
  RUNBROKER_QUEUE_CAPACITY    runs that may wait (16; the running one is not counted)
  RUNBROKER_GRACE             SIGTERM to SIGKILL for a job (5s)
  RUNBROKER_SHUTDOWN_TIMEOUT  the whole shutdown budget (8s)
  RUNBROKER_REQUEST_TIMEOUT   a client must send its request within this (30s)
  RUNBROKER_MAX_CONNECTIONS   connections held at once, below the descriptor limit (1024)
  RUNBROKER_DATABASE_URL      PostgreSQL (unset: no database); never logged
  RUNBROKER_DATABASE_URL_FILE the same, read from a file (or /run/secrets/runbroker_database_url)
  RUNBROKER_POLL_INTERVAL     database fallback poll (1m)
  RUNBROKER_BATCH_SIZE        jobs claimed per transaction (20)
  RUNBROKER_RETRY_ATTEMPTS    attempts in all, the first included (3)
  RUNBROKER_RETRY_BACKOFF     base of the exponential backoff (1m)
  RUNBROKER_LEASE             how long a claim lives without a heartbeat (1m)
  RUNBROKER_DEPENDENCY_WAIT   how long a job waits for the jobs it depends on (1m)
  RUNBROKER_RUN_RETENTION     finished runs older than this are pruned (720h)
  RUNBROKER_LOG_FORMAT        auto, json or console (auto: json unless a TTY)
  RUNBROKER_LOG_LEVEL         debug, info, warning or error (info)
  RUNBROKER_METRICS_ADDR      host:port for Prometheus metrics (unset: off)
  RUNBROKER_OUTPUT_RUN_BYTES  output `logs` keeps of a run, its last lines (1MiB)
  RUNBROKER_OUTPUT_HISTORY_RUNS  finished runs whose output is kept (32)
  RUNBROKER_OUTPUT_HISTORY_BYTES  their output together, at most (16MiB)
  RUNBROKER_OUTPUT_LOG        a job's lines in this log: json (run.output events), raw, off
  RUNBROKER_OUTPUT_HOLD       a reader behind may hold a job's output back this long (5s)
Durations are Go-style: 90s, 1h30m, 250ms.

SIGHUP, a change of the tasks file on disk and `runbroker reload` reload the tasks file, all
or nothing; the settings above are read once, at start. SIGTERM, SIGINT, SIGQUIT, SIGXCPU and
SIGPWR drain and stop; SIGUSR1 logs the status; the other signals are logged and ignored
(docs/signals.md, "Signals and shutdown").

exit codes: 0 after a clean drain, 2 a configuration error, 1 a fatal error
or a forced exit (a second signal).

examples:
  runbroker run -- /app/job.sh --quiet
  RUNBROKER_INTERVAL=5m RUNBROKER_TASKS_FILE=/app/tasks.toml runbroker run
"""

NEXT_HELP = """\
The next N planned times of each task with an `interval` or a `schedule` (or of TASK), each
in the task's zone and in UTC. A time an offset change moved is marked: `DST gap` (the wall
time did not exist; the slot runs at the end of the gap, as cron does) or `DST fold` (the wall
time happened twice: a fixed-time job runs once, at the first pass; a `*` job at both, and
each is marked with its pass). An interval task's times are its ticker's grid, each tick
moved by up to RUNBROKER_JITTER. The times are those the daemon's ticker fires at. With
--after TIME they are the first ones after TIME (RFC 3339 with an offset) instead of now: the
times around next spring's change, say.

By default the running daemon is asked. With --file PATH no daemon is needed: the plans are
those a daemon started now with this environment would make of PATH (RUNBROKER_INTERVAL,
RUNBROKER_COMMAND and RUNBROKER_FIRE_ON_START count).

exit codes:
  0    printed
  2    an unknown task, a bad tasks file or setting, or a daemon older than `next`
  69   the daemon is unreachable (RUNBROKER_SOCKET), or refuses this user

examples:
  runbroker next                         the next 5 times of every task
  runbroker next report --count 10 --json
  runbroker next --file tasks.toml       from a file, without a daemon
  runbroker next report --after 2027-03-27T00:00:00Z   across Europe's spring change
"""

CHECK_HELP = """\
Reads FILE as the daemon reads its tasks file (TOML, every task, its schedule and zone, its
handler imported) and prints every problem as `FILE:LINE: message` on stderr, one a line,
going on past a task's first mistake to the next task (a TOML syntax error stops it), and
what the daemon would warn of as `FILE:LINE: warning: ...`. The verdict is the daemon's own
start-up check, in this environment (RUNBROKER_COMMAND, with a database the lease rule). No
daemon is needed: for CI and for pre-commit hooks.

exit codes:
  0    the daemon would start with the file
  2    it would not (one line per problem)

examples:
  runbroker check deploy/tasks.toml
  RUNBROKER_TASKS_FILE=/app/tasks.toml runbroker check
"""
