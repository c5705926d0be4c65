"""An MIT Kerberos KDC of a test's own: its realm, database, principals and keytabs in a
temporary directory, serving on a free port of 127.0.0.1 (``krb5kdc -n``, in the foreground,
stopped by its PID).  Debian's krb5-kdc, krb5-admin-server (``kadmin.local``) and krb5-user
(``kinit``) provide the programs; :func:`kdc_available` says whether they are here.

Clients and brokers read ``krb5_conf`` (``KRB5_CONFIG`` for MIT's library,
``-Djava.security.krb5.conf`` for Java's): the realm's KDC on 127.0.0.1, no DNS, no reverse
lookups, TCP only; ``localhost`` belongs to the realm (the brokers' service principals are
``kafka/localhost``: Kerberos names the host the client dialled).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from sparkkafka_sink.testing.brokers import HOST, BrokerStartError, free_port
from sparkkafka_sink.testing.local_process import file_tail, spawn_logged, terminate

__all__ = ["Kdc", "kdc_available"]

_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def _which(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path=os.pathsep.join(_SBIN))


def kdc_available() -> bool:
    """MIT's KDC programs are installed (Debian: krb5-kdc krb5-admin-server krb5-user)."""
    return all(_which(p) for p in _PROGRAMS)


class Kdc:
    """One KDC for ``realm``, files under ``directory``.  ``start()``, then ``add_principal``,
    ``keytab``, ``kinit``; ``close()`` (or the context manager) stops it."""

    def __init__(self, directory: Path, realm: str = "SPARKKAFKA.TEST", ticket_lifetime: str = "1h"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.realm = realm
        self.port = free_port(HOST)
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.log = self.dir / "kdc.log"
        self.ticket_lifetime = ticket_lifetime
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """What MIT's library and tools read to find this KDC (and no other)."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, *command: str, stdin: str | None = None) -> str:
        program = _which(command[0]) or command[0]
        done = subprocess.run([program, *command[1:]], env={**os.environ, **self.env}, input=stdin,
                              capture_output=True, text=True, timeout=60, cwd=self.dir)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def start(self, timeout: float = 30.0) -> Kdc:
        self.krb5_conf.write_text(f"""[libdefaults]
    default_realm = {self.realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    rdns = false
    dns_canonicalize_hostname = false
    udp_preference_limit = 1
    ticket_lifetime = {self.ticket_lifetime}
    forwardable = true

[realms]
    {self.realm} = {{
        kdc = {HOST}:{self.port}
        admin_server = {HOST}:{self.port}
    }}

[domain_realm]
    localhost = {self.realm}
    .localhost = {self.realm}
""")
        self.kdc_conf.write_text(f"""[kdcdefaults]
    kdc_ports = {self.port}
    kdc_tcp_ports = {self.port}

[realms]
    {self.realm} = {{
        database_name = {self.dir / 'principal'}
        key_stash_file = {self.dir / 'stash'}
        acl_file = {self.dir / 'kadm5.acl'}
        max_life = {self.ticket_lifetime}
        max_renewable_life = 1d
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log}
""")
        (self.dir / "kadm5.acl").write_text("")
        self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", "sparkkafka-master-key")
        self._proc = spawn_logged([_which("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
                                  self.dir / "stdout.log", self.dir, env={**os.environ, **self.env})
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise BrokerStartError(f"the KDC on {HOST}:{self.port} did not start:\n"
                                           f"{file_tail(self.dir / 'stdout.log', 20)}\n{file_tail(self.log, 20)}") from None
                time.sleep(0.1)
        return self

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, password: str | None = None) -> str:
        """Add ``name`` (a random key, or ``password``); its full name."""
        full = self.principal(name)
        if password is None:
            self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc -randkey {full}")
        else:
            self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc -pw {password} {full}")
        return full

    def delete_principal(self, name: str) -> None:
        self._run("kadmin.local", "-r", self.realm, "-q", f"delprinc -force {self.principal(name)}")

    def keytab(self, name: str, path: Path | None = None) -> Path:
        """A keytab of ``name``'s keys (new random keys: earlier keytabs of it stop working)."""
        path = path or self.dir / f"{name.replace('/', '_').split('@')[0]}.keytab"
        self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {path} {self.principal(name)}")
        return path

    def kinit(self, name: str, keytab: Path, cache: Path, lifetime: str | None = None) -> Path:
        """A ticket cache file holding ``name``'s ticket (from its keytab)."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{cache}",
                  *(["-l", lifetime] if lifetime else []), self.principal(name))
        return cache

    def close(self) -> None:
        if self._proc is not None:
            terminate(self._proc, 5)
            self._proc = None

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
