"""The shipped alert rules and dashboard: promtool accepts and unit-tests the rules, the
dashboard's queries parse, and every metric either names is one the daemon exports.

promtool comes from Debian's ``prometheus`` package; ``scripts/test`` unpacks it (without
installing the server) and names it in ``RUNBROKER_PROMTOOL``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from daemon.core.runqueue import RunQueue
from daemon.core.ticker.ticker import TickPlan
from daemon.observe.metrics import Metrics
from daemon.schedules import parse_schedule

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "runbroker.json"
METRIC_NAME = re.compile(r"\b((?:runbroker|process)_[a-z_]+)\b")
# Grafana's variables, as a query runs: any instance, any task, a five-minute window.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$instance": ".*", "$task": ".*"}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = os.environ.get("RUNBROKER_PROMTOOL") or shutil.which("promtool")
    assert found, "promtool is needed: scripts/test unpacks it from Debian's prometheus package"
    return found


def _promtool(promtool: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class _Database:
    def metrics_snapshot(self) -> dict[str, float]:
        return {"db_up": 1.0}


def _exported_names() -> set[str]:
    """Every sample name a daemon with a task, a ticking plan and a database exports."""
    plans = [
        TickPlan(task="report", interval_s=60.0, next_fire_at=1.8e9),
        TickPlan(task="nightly", schedule=parse_schedule("daily 02:00"), next_fire_at=1.8e9),
    ]
    metrics = Metrics(RunQueue(4), _Database, tasks=["report"], plans=lambda: plans)
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        names.update(sample.name for sample in family.samples)
    return names


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def _with_variables(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def test_promtool_accepts_the_rules(promtool: str) -> None:
    out = _promtool(promtool, "check", "rules", RULES.name, cwd=RULES.parent)
    assert f"SUCCESS: {len(_rules())} rules found" in out


def test_each_alert_has_a_unit_test_and_they_pass(promtool: str) -> None:
    alerts = {rule["alert"] for rule in _rules() if "alert" in rule}
    assert len(alerts) >= 5
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert alerts == tested, f"untested: {alerts - tested}, unknown: {tested - alerts}"
    _promtool(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)


def test_the_dashboards_queries_parse(promtool: str, tmp_path: Path) -> None:
    # promtool has no query parser of its own: each query becomes a recording rule to check.
    queries = _dashboard_queries()
    rules = [
        {"record": f"dashboard:query_{i}", "expr": _with_variables(query)}
        for i, query in enumerate(queries)
    ]
    (tmp_path / "dashboard.yml").write_text(json.dumps({"groups": [{"name": "d", "rules": rules}]}))
    out = _promtool(promtool, "check", "rules", "dashboard.yml", cwd=tmp_path)
    assert f"SUCCESS: {len(queries)} rules found" in out


def test_every_metric_named_is_exported() -> None:
    exported = _exported_names()
    named_by_rules = {n for rule in _rules() for n in METRIC_NAME.findall(rule["expr"])}
    named_by_dashboard = {n for q in _dashboard_queries() for n in METRIC_NAME.findall(q)}
    assert named_by_rules
    assert named_by_dashboard
    assert named_by_rules <= exported, named_by_rules - exported
    assert named_by_dashboard <= exported, named_by_dashboard - exported


def test_the_dashboard_covers_what_operators_watch() -> None:
    named = {n for q in _dashboard_queries() for n in METRIC_NAME.findall(q)}
    for metric in (
        "runbroker_runs_total",
        "runbroker_run_duration_seconds_bucket",
        "runbroker_queue_depth",
        "runbroker_schedule_lag_seconds",
        "runbroker_db_up",
    ):
        assert metric in named
