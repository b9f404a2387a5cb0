"""The Postgres runner: claiming, running and recording scheduled jobs; its store; the admin
commands.
"""
