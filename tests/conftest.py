"""The suite's one plugin of shared fixtures (pytest takes ``pytest_plugins`` only here, at the
top of the test tree), and its Hypothesis profile.

The profile turns off Hypothesis's two timing checks (the per-example deadline and the
too-slow health check): a loaded two-core machine, or the suite run twice at once, makes any
example slow, and no test of this suite may fail for time. What a property asserts is
unchanged.
"""

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.support.daemon_plugin"]

settings.register_profile(
    "runbroker",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("runbroker")
