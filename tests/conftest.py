"""The suite's one plugin of shared fixtures (pytest takes ``pytest_plugins`` only here, at the
top of the test tree)."""

pytest_plugins = ["tests.support.daemon_plugin"]
