"""A stand-in of Databricks' ``databricks.service_credentials`` (the worker-side entry point to
Unity Catalog service credentials), for the tests: ``getServiceCredentialsProvider(name)`` answers
what Databricks documents it answers -- for an AWS IAM role a botocore session whose credentials
are temporary and refresh themselves (botocore's ``RefreshableCredentials``, as STS-issued ones
do), for a Google service account google-auth credentials.

What it serves is read from the JSON file ``$SPARKKAFKA_STANDIN_CREDENTIALS``::

    {"log": "/path/to/log",                      # a line per provider made and per refresh
     "credentials": {
        "msk-writer": {"cloud": "aws", "access_key_id": "...", "secret_access_key": "...",
                       "lifetime_s": 3600},
        "gcp-writer": {"cloud": "google", "key_file": "/path/sa.json"}}}

Each refresh of an AWS credential issues a new session token ``expires-<epoch s>-<generation>``:
the test broker (tests/security/java/SigV4Check.java) refuses a signature made with one past its
expiry, as MSK refuses expired STS credentials.  A name not in the file raises, as Databricks does
for a credential that does not exist or that the user may not access.  ``clock`` may be replaced
(unit tests) to move time.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import threading
import time

#: seconds since the epoch; unit tests replace it
clock = time.time
_generations = itertools.count(1)
_lock = threading.Lock()


def _settings() -> dict:
    path = os.environ.get("SPARKKAFKA_STANDIN_CREDENTIALS")
    if not path:
        raise RuntimeError("the Databricks stand-in has no credentials file (SPARKKAFKA_STANDIN_CREDENTIALS)")
    with open(path) as f:
        return json.load(f)


def _log(settings: dict, line: str) -> None:
    if settings.get("log"):
        with _lock, open(settings["log"], "a") as f:
            f.write(f"{os.getpid()} {line}\n")


def getServiceCredentialsProvider(name: str):  # Databricks' own spelling
    settings = _settings()
    entry = settings.get("credentials", {}).get(name)
    if entry is None:
        raise PermissionError(f"Service credential '{name}' does not exist or you do not have ACCESS on it")
    _log(settings, f"provider {name}")
    if entry["cloud"] == "google":
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_file(
            entry["key_file"], scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return _aws_session(settings, name, entry)


def _aws_session(settings: dict, name: str, entry: dict):
    import botocore.session
    from botocore.credentials import CredentialProvider, CredentialResolver, RefreshableCredentials

    def issue() -> dict:
        generation = next(_generations)
        expiry = clock() + float(entry.get("lifetime_s", 3600))
        _log(settings, f"refresh {name} {generation}")
        return {"access_key": entry["access_key_id"], "secret_key": entry["secret_access_key"],
                "token": f"expires-{int(expiry)}-{generation}",
                "expiry_time": dt.datetime.fromtimestamp(expiry, dt.timezone.utc).isoformat()}

    class ServiceCredentialProvider(CredentialProvider):
        METHOD = "databricks-service-credential"

        def load(self):
            first = issue()
            return RefreshableCredentials(
                first["access_key"], first["secret_key"], first["token"],
                dt.datetime.fromisoformat(first["expiry_time"]), refresh_using=issue, method=self.METHOD,
                time_fetcher=lambda: dt.datetime.fromtimestamp(clock(), dt.timezone.utc))

    session = botocore.session.Session()
    session.register_component("credential_provider", CredentialResolver([ServiceCredentialProvider()]))
    return session
