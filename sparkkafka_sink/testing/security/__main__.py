"""``python -m sparkkafka_sink.testing.security``: one secured Apache Kafka node in the
foreground, for trying a client against it by hand."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence

from sparkkafka_sink.testing.apache_kafka import ApacheKafka
from sparkkafka_sink.testing.security.broker_security import LISTENERS, SASL_MECHANISMS, BrokerSecurity
from sparkkafka_sink.testing.security.pki import TestPki
from sparkkafka_sink.testing.security.token_endpoint import TokenEndpoint


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sparkkafka_sink.testing.security [--dir DIR]``: one secured Apache Kafka node
    in the foreground; prints its listeners, the PKI's files and the users."""
    p = argparse.ArgumentParser(prog="python -m sparkkafka_sink.testing.security",
                                description="Run one Apache Kafka node with TLS and SASL listeners.")
    p.add_argument("--dir", help="where the PKI is written (default: a new temporary directory)")
    p.add_argument("--reauth-ms", type=int, default=3000)
    args = p.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pki = TestPki(args.dir or tempfile.mkdtemp(prefix="sparkkafka-pki-"))
    security = BrokerSecurity(pki, reauth_ms=args.reauth_ms)
    with TokenEndpoint() as endpoint:
        cluster = ApacheKafka(1, security=security).start()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            for name in cluster.listener_names:
                proto = LISTENERS[name].protocol if name in LISTENERS else "PLAINTEXT"
                print(f"{name:15} {proto:15} {cluster.bootstrap(name)}")
            print(f"# CA {pki.ca_cert_path}; client cert {pki.client.chain_path}, key "
                  f"{pki.client.key_path}; PKI in {pki.dir}", file=sys.stderr)
            for mech in SASL_MECHANISMS[:-1]:
                print(f"# {mech}: {security.users(mech)}", file=sys.stderr)
            print(f"# OAUTHBEARER: any unsecured JWT; token endpoint {endpoint.url} "
                  f"({endpoint.client_id} / {endpoint.client_secret}); Ctrl-C stops",
                  file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                if not all(n.running for n in cluster.nodes):
                    print("# the node exited:\n" + cluster.nodes[0].log_tail(), file=sys.stderr)
                    return 1
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
