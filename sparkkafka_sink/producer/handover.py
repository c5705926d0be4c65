"""The hand-over: a transaction one process opened, ended by another (the Spark driver commits
what the tasks prepared).

``Producer.prepare`` returns a ``PreparedTransaction``: the transactional id, its producer id
and epoch, its partitions.  EndTxn under that id and epoch commits or aborts the transaction
without fencing it -- the coordinator does not care which connection asks -- and asking again
after a lost answer is safe (a transaction already committed answers NONE to the same commit).
A transaction begun under transactions v2 is ended with EndTxn v5 (the coordinator bumps its
epoch), one of v1 with v4 at most.  ``abort_lingering`` finds the open
transactions whose ids start with a prefix (ListTransactions on every broker) and aborts them by
fencing (InitProducerId under their id makes the coordinator abort what is open), so a failed
job leaves nothing that blocks read_committed consumers until ``transaction.timeout.ms``.
Both that listing and asking about another id's transaction (DescribeTransactions) arrived in
Apache Kafka 3.0 (KIP-664): ``brokers_lacking`` names the brokers that cannot serve them.

These are short blocking calls (``BlockingAdmin``), each bounded by a deadline.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.network.broker_release import API_SINCE, kafka_release
from sparkkafka_sink.producer.admin import BlockingAdmin
from sparkkafka_sink.producer.control_requests import (
    DescribeTransactions,
    EndTxn,
    InitProducerId,
    ListTransactions,
    Outcome,
    TransactionDescription,
)
from sparkkafka_sink.protocol.api import DECLARED, ApiKey

log = logging.getLogger(__name__)

#: states of a transaction that still needs an end (Kafka's TransactionState names)
OPEN_STATES = ("Ongoing",)
#: ... and of a producer that may still begin one (initialised, nothing written yet)
OPEN_OR_IDLE_STATES = ("Ongoing", "Empty")
#: what ending other processes' transactions asks of every broker besides EndTxn and
#: InitProducerId: the open transactions under a prefix (``abort_lingering``) and one id's state
#: (the Spark sink's write fence)
HANDOVER_APIS = (ApiKey.LIST_TRANSACTIONS, ApiKey.DESCRIBE_TRANSACTIONS)


class BrokerLacking(NamedTuple):
    """A broker that does not answer some APIs: where it is, the release it answers as
    (``network.broker_release``), the APIs' names and the release that first answers them all."""

    address: str
    release: str
    missing: tuple[str, ...]
    needed: str


@dataclass(frozen=True)
class PreparedTransaction:
    """An open transaction handed over (``Producer.prepare``): small, picklable and JSON-able
    (Spark commit messages), all another process needs to end it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    #: begun under transactions v2: its EndTxn is v5 (v4 at most otherwise)
    transaction_v2: bool = False

    def to_json(self) -> str:
        return json.dumps({"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                           "producer_epoch": self.producer_epoch, "partitions": [list(p) for p in self.partitions],
                           "transaction_v2": self.transaction_v2})

    @classmethod
    def from_json(cls, text: str) -> PreparedTransaction:
        d = json.loads(text)
        return cls(d["transactional_id"], int(d["producer_id"]), int(d["producer_epoch"]),
                   tuple((t, int(p)) for t, p in d["partitions"]), bool(d.get("transaction_v2", False)))

    def end_request(self, commit: bool,
                    on_outcome: Callable[[EndTxn, Outcome], None] | None = None) -> EndTxn:
        """The EndTxn that commits or aborts this transaction (from any process)."""
        return EndTxn(self.transactional_id, self.producer_id, self.producer_epoch, commit, self.transaction_v2,
                      on_outcome)


class TransactionAdmin(BlockingAdmin):
    """Blocking coordinator calls with the producer's configuration (security included)."""

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config, "txn-admin")

    def coordinator(self, transactional_id: str, deadline: float) -> int:
        """The node coordinating ``transactional_id`` now (looked up afresh)."""
        self.coordinators.forget(transactional_id)
        self.brokers(deadline)
        return self.run(self.coordinators.lookup(transactional_id), deadline)

    def end(self, prepared: PreparedTransaction, commit: bool, deadline: float) -> None:
        """Commit or abort ``prepared`` under its producer id and epoch (a transaction already
        ended that way answers NONE again: asking after a lost answer is safe)."""
        self.run(prepared.end_request(commit), deadline)

    def brokers_lacking(self, api_keys: Iterable[int]) -> list[BrokerLacking]:
        """The brokers this admin is connected to (those it asked so far) that do not answer
        all of ``api_keys``.  Brokers it has not reached are not judged: one that is down must
        not fail a write the others can serve."""
        wanted = list(api_keys)
        lacking = []
        for node in sorted(self.metadata.cluster.brokers):
            conn = self.client.connection(node)
            versions = conn.api_versions if conn is not None else {}
            missing = [k for k in wanted if k not in versions]
            if versions and missing:
                needed = max((API_SINCE[k] for k in missing), key=lambda r: tuple(map(int, r.split("."))))
                lacking.append(BrokerLacking(self.metadata.cluster.brokers[node].address, kafka_release(versions),
                                             tuple(DECLARED[k].spec for k in missing), needed))
        return lacking

    def describe(self, transactional_id: str, deadline: float) -> TransactionDescription | None:
        """The coordinator's view of ``transactional_id`` (None: it does not know the id)."""
        return self.run(DescribeTransactions(transactional_id), deadline)

    def fence(self, transactional_id: str, deadline: float) -> tuple[int, int]:
        """InitProducerId under ``transactional_id``: the coordinator aborts its open transaction;
        the producer id and epoch it gave."""
        result: tuple[int, int] = self.run(InitProducerId(transactional_id, self.config.transaction_timeout_ms),
                                           deadline)
        return result

    def open_transactions(self, prefix: str, deadline: float,
                          states: tuple[str, ...] = OPEN_STATES) -> list[tuple[str, int, str]]:
        """``(transactional id, producer id, state)`` of every open transaction under ``prefix``.

        Each broker lists the transactions it coordinates (``run_on_every_broker``)."""
        answers = self.run_on_every_broker(lambda: ListTransactions(prefix, states), deadline)
        return [found for listed in answers for found in listed]

    def abort_lingering(self, prefix: str, deadline: float, exclude: Iterable[str] = (),
                        states: tuple[str, ...] = OPEN_STATES) -> list[str]:
        """Abort every open transaction whose id starts with ``prefix`` (except ``exclude``);
        returns the ids aborted.  With ``OPEN_OR_IDLE_STATES`` producers initialised but not in a
        transaction are fenced too: they can never begin one."""
        if not prefix:
            raise KafkaError("abort_lingering needs a non-empty transactional id prefix")
        skip = set(exclude)
        aborted = []
        for txn_id, _, state in self.open_transactions(prefix, deadline, states):
            if txn_id in skip:
                continue
            log.info("fencing %r (%s)", txn_id, state)
            self.fence(txn_id, deadline)
            if state in OPEN_STATES:
                aborted.append(txn_id)
        return aborted


def complete_transaction(prepared: PreparedTransaction, commit: bool, config: Mapping[str, Any],
                         timeout: float = 60.0) -> None:
    """Commit (or abort) a transaction another process ``prepare()``d, under its producer id and
    epoch; retriable answers are retried within ``timeout`` seconds."""
    with TransactionAdmin(config) as admin:
        admin.end(prepared, commit, time.monotonic() + timeout)


def abort_lingering(prefix: str, config: Mapping[str, Any], *, exclude: Iterable[str] = (),
                    timeout: float = 60.0) -> list[str]:
    """Abort every open transaction whose id starts with ``prefix`` (except ``exclude``);
    returns the ids aborted."""
    with TransactionAdmin(config) as admin:
        return admin.abort_lingering(prefix, time.monotonic() + timeout, exclude)
