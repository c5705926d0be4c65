"""The operator's command for the sink's open transactions, for when no next write is coming.

An exactly-once write whose driver died leaves its task transactions open; until they end, every
read_committed reader of their partitions stands still.  The driver's keeper ends them within a
second when the driver's JVM dies on a host that lives on, and the next exactly-once write under
the same prefix ends them before its tasks begin (``spark/driver/lease.py``).  Where neither
comes -- the host went down with the driver, and the job is not run again -- this does::

    python -m sparkkafka_sink.transactions list  --bootstrap-servers host:9092 [--prefix P]
    python -m sparkkafka_sink.transactions abort --bootstrap-servers host:9092 [--prefix P] [--yes]

``--command-config FILE`` gives the producer's settings (security) as a Java properties file, as
Kafka's own tools take it.  ``list`` shows each open transaction under the prefix (by default
every prefix the sink makes): its age, partitions, the write it belongs to, and whether that
write's driver still holds its lease.  ``abort`` ends those whose driver is gone as the driver
would have: aborted, except those of a batch write its driver had decided to commit (it died
during its commit: they are committed, so the write is visible whole, never in part).  A dry
run says what it would do, unless ``--yes``.  A live driver's transactions are never touched.
The same from Python (a notebook): :func:`list_open`, :func:`abort_dead`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.producer.config import ProducerConfig, read_properties
from sparkkafka_sink.producer.dead_writes import decided, settle
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.producer.leases import OpenTransaction, judge, parse

__all__ = ["SINK_PREFIX", "SinkTransaction", "list_open", "abort_dead", "main"]

#: what every transactional id the sink makes by default starts with
SINK_PREFIX = "pyprod-kafka-"
_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SinkTransaction:
    """An open transaction under the prefix, as ``list`` shows it."""

    transactional_id: str
    #: the write it belongs to (``<prefix>-r<run>``; None: not an id the sink made)
    write: str | None
    #: its driver holds its lease
    driver_alive: bool
    age_s: float | None
    partitions: tuple[tuple[str, int], ...]
    state: str
    #: its driver had decided to commit it (it died during the commit): ending it commits it
    decided: bool = False


def _config(bootstrap_servers: str, config: Mapping[str, Any] | None) -> ProducerConfig:
    return ProducerConfig({**(config or {}), "bootstrap.servers": bootstrap_servers})


def _shown(t: OpenTransaction, alive: bool, now_ms: float, to_commit: Collection[str] = ()) -> SinkTransaction:
    d, owned = t.description, parse(t.transactional_id)
    return SinkTransaction(t.transactional_id, f"{owned[0]}-r{owned[1]}{owned[2]}" if owned else None,
                           alive, t.age_s(now_ms), d.partitions if d else (), d.state if d else "unknown",
                           t.transactional_id in to_commit)


def _judged(admin: TransactionAdmin, prefix: str) -> tuple[list[OpenTransaction], list[OpenTransaction]]:
    return judge(admin, prefix, time.monotonic() + _TIMEOUT_S)


def list_open(bootstrap_servers: str, prefix: str = SINK_PREFIX,
              config: Mapping[str, Any] | None = None) -> list[SinkTransaction]:
    """The open transactions whose ids start with ``prefix`` (``config``: the producer's other
    settings, security included), oldest first.  Takes a few seconds: a driver's lease is
    watched until it moves."""
    with TransactionAdmin(_config(bootstrap_servers, config)) as admin:
        alive, gone = _judged(admin, prefix)
        to_commit = decided(admin, [t.transactional_id for t in gone], time.monotonic() + _TIMEOUT_S)
    now_ms = time.time() * 1000
    found = [_shown(t, True, now_ms) for t in alive] + [_shown(t, False, now_ms, to_commit) for t in gone]
    return sorted(found, key=lambda t: -(t.age_s or 0))


def abort_dead(bootstrap_servers: str, prefix: str = SINK_PREFIX, config: Mapping[str, Any] | None = None,
               dry_run: bool = True) -> list[SinkTransaction]:
    """The open transactions under ``prefix`` whose write's driver is gone, ended unless
    ``dry_run`` (the default: only say which) as their driver would have: aborted, or committed
    where it had decided to commit (``SinkTransaction.decided``).  Those of a live driver are
    left alone."""
    with TransactionAdmin(_config(bootstrap_servers, config)) as admin:
        _, gone = _judged(admin, prefix)
        ids, deadline = [t.transactional_id for t in gone], time.monotonic() + _TIMEOUT_S
        to_commit = decided(admin, ids, deadline)
        now_ms = time.time() * 1000
        shown = [_shown(t, False, now_ms, to_commit) for t in gone]
        if not dry_run:
            settle(admin, ids, deadline)
    return shown


def _table(found: Sequence[SinkTransaction]) -> str:
    rows = [("TRANSACTIONAL ID", "STATE", "AGE", "DRIVER", "ENDS BY", "PARTITIONS")]
    for t in found:
        parts = ", ".join(f"{topic}-{p}" for topic, p in t.partitions) or "-"
        ends = "-" if t.driver_alive else "commit" if t.decided else "abort"
        rows.append((t.transactional_id, t.state, "-" if t.age_s is None else f"{t.age_s:.0f} s",
                     "alive" if t.driver_alive else "gone", ends, parts))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sparkkafka_sink.transactions",
                                 description="The sink's open transactions: list them, abort those whose driver is gone.")
    ap.add_argument("action", choices=("list", "abort"))
    ap.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    ap.add_argument("--prefix", default=SINK_PREFIX,
                    help=f"transactional ids starting with this (default {SINK_PREFIX!r}: every prefix the sink makes; "
                         "give transactionalIdPrefix when you set it)")
    ap.add_argument("--command-config", metavar="FILE", help="the producer's settings (security), a properties file")
    ap.add_argument("--yes", action="store_true", help="abort: do it (without: a dry run that lists what would go)")
    args = ap.parse_args(argv)
    config = read_properties(args.command_config) if args.command_config else None
    if args.action == "list":
        found = list_open(args.bootstrap_servers, args.prefix, config)
        print(_table(found) if found else f"no open transaction under {args.prefix!r}")
        return 0
    dead = abort_dead(args.bootstrap_servers, args.prefix, config, dry_run=not args.yes)
    if not dead:
        print(f"no open transaction under {args.prefix!r} whose driver is gone")
    else:
        print(_table(dead))
        commits = sum(t.decided for t in dead)
        print(f"{'ended' if args.yes else 'would end (run again with --yes)'}: {len(dead)} transactions of "
              f"{len({t.write for t in dead})} writes whose driver is gone: {len(dead) - commits} aborted, "
              f"{commits} committed (their driver had decided to commit them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
