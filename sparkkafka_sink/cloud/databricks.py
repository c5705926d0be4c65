"""Databricks Unity Catalog service credentials: the cloud credentials a named service credential
grants, read through Databricks' own Python API, never through a secret the job holds.

Databricks documents two entry points to the same object (a botocore session for an AWS IAM role,
google-auth credentials for a Google service account, an Azure ``TokenCredential``):

* ``databricks.service_credentials.getServiceCredentialsProvider(name)``, importable where
  Databricks runs Python worker code (UDFs; the sink's tasks and its driver-side checks run in
  Python workers too);
* ``dbutils.credentials.getServiceCredentialsProvider(name)`` on the driver, in a notebook's or a
  job's own process (the ``dbutils`` of its namespace, or ``pyspark.dbutils.DBUtils`` over the
  active SparkSession).

:class:`ServiceCredential` asks the first that exists, once per process, and says which cloud the
credential is for; the object keeps its own credentials fresh (botocore's refreshable credentials
renew ahead of their expiry; google-auth's are refreshed before each token).  Where neither entry
point exists the error names the setting and what it needs.  Nothing here runs off Databricks
except against a stand-in of that API (the tests').
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

from sparkkafka_sink.errors import ConfigError, Message, Setting

#: the producer key naming the service credential (the sink's option ``databricks.serviceCredential``)
KEY = "sasl.databricks.service.credential"
WORKER_MODULE = "databricks.service_credentials"
FUNCTION = "getServiceCredentialsProvider"


def _worker_api() -> Callable[[str], Any] | None:
    try:
        module = importlib.import_module(WORKER_MODULE)
    except ImportError:
        return None
    return getattr(module, FUNCTION, None)


def _dbutils() -> Any:
    """The driver's ``dbutils``: the notebook's or job's namespace, else ``pyspark.dbutils.DBUtils``
    over the active session (Databricks' runtime ships that module); None elsewhere."""
    main = sys.modules.get("__main__")
    found = getattr(main, "dbutils", None)
    if found is None:
        try:
            from IPython import get_ipython

            shell = get_ipython()
            found = shell.user_ns.get("dbutils") if shell is not None else None
        except ImportError:
            found = None
    if found is None:
        try:
            from pyspark.dbutils import DBUtils  # type: ignore[import-not-found]
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
            found = DBUtils(session) if session is not None else None
        except ImportError:
            found = None
    return found


def _lookup(name: str) -> Callable[[], Any]:
    """The function that returns the named credential's provider object, from the first entry point found."""
    worker = _worker_api()
    if worker is not None:
        return lambda: worker(name)
    dbutils = _dbutils()
    credentials = getattr(dbutils, "credentials", None)
    if credentials is not None and hasattr(credentials, FUNCTION):
        return lambda: getattr(credentials, FUNCTION)(name)
    raise ConfigError(Message(
        "{!r} names the Unity Catalog service credential {!r}, which is read through Databricks' Python API "
        "({}.{} in worker code, dbutils.credentials.{} on the driver); neither exists in this Python: run on a "
        "Databricks Runtime with Unity Catalog, or sign in another way ({} and its settings)", Setting(KEY), name,
        WORKER_MODULE, FUNCTION, FUNCTION, Setting("sasl.mechanism")))


def cloud_of(provider: Any) -> str:
    """'aws' (a botocore or boto3 session), 'google' (google-auth credentials), 'azure' (a
    ``TokenCredential``), or 'unknown'."""
    if callable(getattr(provider, "get_credentials", None)):
        return "aws"
    if callable(getattr(provider, "refresh", None)) and hasattr(provider, "token"):
        return "google"
    if callable(getattr(provider, "get_token", None)):
        return "azure"
    return "unknown"


class ServiceCredential:
    """A named Unity Catalog service credential: its provider object, fetched once per process
    (thread-safe) from Databricks' API."""

    def __init__(self, name: str, lookup: Callable[[str], Callable[[], Any]] = _lookup):
        self.name = name
        self._fetch = lookup(name)
        self._provider: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ServiceCredential({self.name!r})"

    @property
    def description(self) -> str:
        return f"the Unity Catalog service credential {self.name!r}"

    def provider(self) -> Any:
        with self._lock:
            if self._provider is None:
                try:
                    self._provider = self._fetch()
                except Exception as e:  # noqa: BLE001 - Databricks' own errors: no such credential, no ACCESS on it
                    raise ConfigError(Message("{!r}: Databricks refused the service credential {!r}: {}: {}",
                                              Setting(KEY), self.name, type(e).__name__, e)) from None
                if self._provider is None:
                    raise ConfigError(Message("{!r}: Databricks gave no provider for the service credential {!r}",
                                              Setting(KEY), self.name))
            return self._provider

    def cloud(self) -> str:
        return cloud_of(self.provider())
