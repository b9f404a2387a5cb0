"""The broker core: run queue, executor, processes, tasks, ticker.

It knows no database, socket or command line."""
