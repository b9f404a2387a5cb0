"""The Postgres runner: claiming, running and recording scheduled jobs, its store and its admin
commands.
"""
