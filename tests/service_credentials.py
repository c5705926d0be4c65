"""Databricks' service credentials API for the tests: its stand-in (tests/databricks_standin),
made to serve credentials the test brokers know, in this process or in Spark's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STANDIN = Path(__file__).resolve().with_name("databricks_standin")


def standin_file(tmp_path: Path, credentials: dict) -> tuple[Path, Path]:
    """The stand-in's settings file serving ``credentials`` (by name), and its log."""
    log = tmp_path / "standin.log"
    path = tmp_path / "standin-credentials.json"
    path.write_text(json.dumps({"log": str(log), "credentials": credentials}))
    return path, log


def standin_env(path: Path) -> dict[str, str]:
    """What a process (a Spark driver and its workers) needs in its environment to find the stand-in."""
    return {"SPARKKAFKA_STANDIN_CREDENTIALS": str(path),
            "PYTHONPATH": os.pathsep.join(p for p in (str(STANDIN), os.environ.get("PYTHONPATH", "")) if p)}


def use_standin(monkeypatch, path: Path) -> None:
    """This process finds the stand-in as Databricks' ``databricks.service_credentials``."""
    monkeypatch.setenv("SPARKKAFKA_STANDIN_CREDENTIALS", str(path))
    monkeypatch.syspath_prepend(str(STANDIN))
    for name in ("databricks", "databricks.service_credentials"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def aws_role(cloud, lifetime_s: int = 3600) -> dict:
    """An AWS IAM role whose temporary credentials sign with the key ``cloud`` (the cloud_kafka node) knows."""
    return {"cloud": "aws", "access_key_id": cloud.access_key_id, "secret_access_key": cloud.secret_access_key,
            "lifetime_s": lifetime_s}
