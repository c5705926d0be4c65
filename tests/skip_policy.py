"""``SPARKKAFKA_ALLOWED_SKIPS=FILE``: a run in which a test skipped for a reason the file does not
allow fails, listing each such test and its reason.  (An environment variable, not a pytest
option: pytest reads the tests' conftest.py, which loads this plugin, only after it parsed the
command line.)

CI sets it to ``.ci/allowed-skips``: a green CI then cannot hide a missing install step (a
broker's jars, the KDC, python-gssapi) behind skips -- the Apache Kafka tests (exactly-once,
crashes, failover, the oracle, the older brokers, the faults' ``apache`` cases) and the Kerberos
tests must run there.  Each line of the file is a regular expression searched for in
``<test id> -- <reason>``; ``#`` starts a comment (say why that skip is expected); blank lines
are ignored.  Unset, nothing changes: a developer's machine may skip what it lacks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

#: the controller's policy: the allowed patterns and the skips they did not allow (None: no option)
_POLICY: dict | None = None


ENV = "SPARKKAFKA_ALLOWED_SKIPS"


def _patterns(path: str) -> list[re.Pattern]:
    found = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                found.append(re.compile(text))
            except re.error as e:
                raise pytest.UsageError(f"{ENV}={path}:{number}: not a regular expression: {e}") from None
    return found


def pytest_configure(config):
    global _POLICY
    path = os.environ.get(ENV)
    if path and not hasattr(config, "workerinput"):  # the controller sees every worker's reports
        _POLICY = {"path": path, "patterns": _patterns(path), "refused": []}


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report):
    if _POLICY is None or not report.skipped or hasattr(report, "wasxfail"):
        return
    line = f"{report.nodeid} -- {_reason(report)}"
    if not any(p.search(line) for p in _POLICY["patterns"]):
        _POLICY["refused"].append(line)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if _POLICY and _POLICY["refused"] and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _POLICY and _POLICY["refused"]:
        terminalreporter.section(f"skips {ENV} does not allow", red=True)
        for line in _POLICY["refused"]:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"{len(_POLICY['refused'])} test(s) skipped for a reason {_POLICY['path']} "
                                    "does not allow: the run fails")
