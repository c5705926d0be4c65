"""The operator's command for the sink's open writes, for when no next write is coming.

An exactly-once write whose driver died leaves its task transactions open; until they end, every
read_committed reader of their partitions stands still.  The driver's keeper ends them within a
second or two when the driver's JVM dies on a host that lives on, and the next exactly-once
write under the same prefix ends them before its tasks begin.  Where neither comes -- the host
went down with the driver, and the job is not run again -- this does::

    python -m sparkkafka_sink.transactions list  --bootstrap-servers host:9092 [--prefix P]
    python -m sparkkafka_sink.transactions abort --bootstrap-servers host:9092 [--prefix P] [--yes]

``--command-config FILE`` gives the producer's settings (security) as a Java properties file, as
Kafka's own tools take it; ``--decision-topic`` the topic the writes' decisions are kept in, when
not the default; ``--lease-window`` how long a lease is watched (30 s).  ``list`` shows each open transaction under the prefix (by default every prefix
the sink makes): its age, partitions, the write it belongs to, whether that write's driver still
holds its lease, and how ending it would go.  ``abort`` ends the writes whose driver is gone as
the driver decided (``settle``): a write whose decision was recorded is committed as recorded --
never aborted -- and any other aborted.  A dry run says what it would do, unless ``--yes``.  A
live driver's writes are never touched.  From Python (a notebook): :func:`list_open`,
:func:`abort_dead`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.exactly_once.decision_log import DEFAULT_TOPIC, DecisionLog
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.exactly_once.leases import WINDOW_S, judge
from sparkkafka_sink.exactly_once.settle import settle
from sparkkafka_sink.producer.config import ProducerConfig, read_properties
from sparkkafka_sink.producer.handover import TransactionAdmin

__all__ = ["SINK_PREFIX", "SinkTransaction", "list_open", "abort_dead", "main"]

#: what every transactional id the sink makes by default starts with
SINK_PREFIX = "pyprod-kafka-"
_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SinkTransaction:
    """An open transaction under the prefix, as ``list`` shows it."""

    transactional_id: str
    write: str
    #: its driver holds its lease
    driver_alive: bool
    age_s: float | None
    partitions: tuple[tuple[str, int], ...]
    state: str
    #: its write's decision was recorded and names it: ending it commits it
    decided: bool = False


def _config(bootstrap_servers: str, config: Mapping[str, Any] | None) -> ProducerConfig:
    return ProducerConfig({**(config or {}), "bootstrap.servers": bootstrap_servers})


def _shown(admin: TransactionAdmin, write: WriteId, ids: list[str], alive: bool, winners: frozenset[str],
           deadline: float) -> list[SinkTransaction]:
    now_ms = time.time() * 1000
    shown = []
    for txn_id in sorted(ids):
        d = admin.describe(txn_id, deadline)
        age = (now_ms - d.start_time_ms) / 1000 if d is not None and d.start_time_ms >= 0 else None
        shown.append(SinkTransaction(txn_id, write.name, alive, age, d.partitions if d else (),
                                     d.state if d else "unknown", txn_id in winners))
    return shown


def _survey(admin: TransactionAdmin, decisions: DecisionLog, prefix: str, lease_window_s: float
            ) -> tuple[list[SinkTransaction], list[WriteId], list[SinkTransaction]]:
    """(the live drivers' open transactions, the gone drivers' writes, their open transactions)."""
    deadline = time.monotonic() + _TIMEOUT_S + lease_window_s
    alive, gone = judge(admin, prefix, deadline, window_s=lease_window_s)
    live = [t for w, ids in alive.items() for t in _shown(admin, w, ids, True, frozenset(), deadline)]
    dead = []
    for write, ids in gone.items():
        decision = decisions.decision_of(write, deadline)  # not fenced: what ending it would find
        dead += _shown(admin, write, ids, False, decision.winner_ids if decision else frozenset(), deadline)
    return live, sorted(gone), dead


def list_open(bootstrap_servers: str, prefix: str = SINK_PREFIX, config: Mapping[str, Any] | None = None,
              decision_topic: str = DEFAULT_TOPIC, lease_window_s: float = WINDOW_S) -> list[SinkTransaction]:
    """The open transactions whose ids start with ``prefix`` (``config``: the producer's other
    settings, security included), oldest first.  Takes up to ``lease_window_s``: a driver's
    lease is watched until it moves."""
    with TransactionAdmin(_config(bootstrap_servers, config)) as admin:
        live, _, dead = _survey(admin, DecisionLog(admin, decision_topic), prefix, lease_window_s)
    return sorted(live + dead, key=lambda t: -(t.age_s or 0))


def abort_dead(bootstrap_servers: str, prefix: str = SINK_PREFIX, config: Mapping[str, Any] | None = None,
               dry_run: bool = True, decision_topic: str = DEFAULT_TOPIC,
               lease_window_s: float = WINDOW_S) -> list[SinkTransaction]:
    """The open transactions under ``prefix`` whose write's driver is gone; their writes ended
    unless ``dry_run`` (the default: only say which) as their driver decided: committed as
    recorded (``SinkTransaction.decided``), else aborted.  A live driver's are left alone."""
    with TransactionAdmin(_config(bootstrap_servers, config)) as admin:
        decisions = DecisionLog(admin, decision_topic)
        _, writes, dead = _survey(admin, decisions, prefix, lease_window_s)
        if not dry_run:
            deadline = time.monotonic() + _TIMEOUT_S
            for write in writes:
                settle(admin, decisions, write, deadline)
    return dead


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
                                 description="The sink's open transactions: list them, end those whose driver is gone.")
    ap.add_argument("action", choices=("list", "abort"))
    ap.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    ap.add_argument("--prefix", default=SINK_PREFIX,
                    help=f"transactional ids starting with this (default {SINK_PREFIX!r}: every prefix the sink makes; "
                         "give transactionalIdPrefix when you set it)")
    ap.add_argument("--command-config", metavar="FILE", help="the producer's settings (security), a properties file")
    ap.add_argument("--decision-topic", default=DEFAULT_TOPIC,
                    help=f"where the writes' decisions are kept (the sink's decisionTopic; default {DEFAULT_TOPIC!r})")
    ap.add_argument("--lease-window", type=float, default=WINDOW_S, metavar="SECONDS",
                    help=f"how long a driver's lease is watched before the driver is called gone (default {WINDOW_S:.0f}; "
                         "shorter when you know the drivers are gone: a live driver misjudged only fails its job)")
    ap.add_argument("--yes", action="store_true", help="abort: do it (without: a dry run that lists what would go)")
    args = ap.parse_args(argv)
    config = read_properties(args.command_config) if args.command_config else None
    if args.action == "list":
        found = list_open(args.bootstrap_servers, args.prefix, config, args.decision_topic, args.lease_window)
        print(_table(found) if found else f"no open transaction under {args.prefix!r}")
        return 0
    dead = abort_dead(args.bootstrap_servers, args.prefix, config, dry_run=not args.yes,
                      decision_topic=args.decision_topic, lease_window_s=args.lease_window)
    if not dead:
        print(f"no open transaction under {args.prefix!r} whose driver is gone")
    else:
        print(_table(dead))
        commits = sum(t.decided for t in dead)
        print(f"{'ended' if args.yes else 'would end (run again with --yes)'}: {len(dead)} transactions of "
              f"{len({t.write for t in dead})} writes whose driver is gone: {len(dead) - commits} aborted, "
              f"{commits} committed (their driver had decided to commit them)")
    return 0
