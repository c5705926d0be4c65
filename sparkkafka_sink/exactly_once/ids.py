"""The transactional ids of exactly-once writes, and what each one says.

An *owner* (the Spark sink's driver, named by :func:`owner.driver_token`) runs *writes*: one
batch write, or one micro-batch of a streaming query.  Every id a write uses starts with its
name, so the ids say whose write they belong to::

    <prefix>-r<owner><run>[-b<batch>]       the write W (owner: 8 hex digits, run: 6)
    W-p<partition>-t<attempt>               a task attempt's transaction
    W-decision                              the write's decision id: it closes the write, and
                                            its one transaction records the decision
    <prefix>-lease-<owner>                  the owner's lease, bumped while it lives
    <prefix>-probe                          the driver's probe of the coordinator's settings

``<batch>`` is the micro-batch of a streaming query (``writeStream``, or ``foreachBatch`` with
its ``batchId``): such writes keep their decisions per query (the prefix), so a run of the query
finds what an earlier run decided.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

__all__ = ["OWNER_DIGITS", "RUN_DIGITS", "DEFAULT_DECISION_TOPIC", "WriteId", "parse", "is_decision_id", "lease_id",
           "owned_prefix", "probe_id", "new_run"]

OWNER_DIGITS, RUN_DIGITS = 8, 6
#: the topic the writes' decisions are recorded in, unless the sink's ``decisionTopic`` says
DEFAULT_DECISION_TOPIC = "pyprod-kafka-decisions"
_WRITE = re.compile(rf"^(?P<prefix>.+)-r(?P<owner>[0-9a-f]{{{OWNER_DIGITS}}})(?P<run>[0-9a-f]{{{RUN_DIGITS}}})"
                    r"(?:-b(?P<batch>\d+))?(?P<rest>-.*)?$")
_DECISION = "-decision"


@dataclass(frozen=True, order=True)
class WriteId:
    """One write: the transactions an owner commits or aborts together."""

    prefix: str
    owner: str
    run: str
    #: the micro-batch of a streaming query (None: a batch write)
    batch: int | None = None

    @property
    def name(self) -> str:
        return f"{self.prefix}-r{self.owner}{self.run}" + (f"-b{self.batch}" if self.batch is not None else "")

    def __str__(self) -> str:
        return self.name

    @property
    def attempts_prefix(self) -> str:
        """What the transactional ids of the write's task attempts start with."""
        return self.name + "-p"

    def attempt(self, partition: int, attempt: int) -> str:
        """The transactional id of one task attempt (Spark's attempt id is unique in its
        application, so two attempts never fence each other)."""
        return f"{self.attempts_prefix}{partition}-t{attempt}"

    @property
    def decision_id(self) -> str:
        """The transactional id that closes the write and records its decision."""
        return self.name + _DECISION

    @property
    def streaming(self) -> bool:
        return self.batch is not None

    @property
    def decision_key(self) -> str:
        """The key its decision is recorded under: a streaming query keeps its latest decision
        (the prefix is the query's), a batch write its own."""
        return self.prefix if self.streaming else self.name


def parse(transactional_id: str) -> WriteId | None:
    """The write a transactional id belongs to (an attempt's or a decision id); None for any
    other id."""
    m = _WRITE.match(transactional_id)
    if m is None:
        return None
    return WriteId(m["prefix"], m["owner"], m["run"], int(m["batch"]) if m["batch"] is not None else None)


def is_decision_id(transactional_id: str) -> bool:
    return transactional_id.endswith(_DECISION) and parse(transactional_id) is not None


def lease_id(prefix: str, owner: str) -> str:
    """The transactional id whose epoch ``owner``'s keeper bumps while the owner lives."""
    return f"{prefix}-lease-{owner}"


def owned_prefix(prefix: str, owner: str) -> str:
    """What every transactional id of ``owner``'s writes under ``prefix`` starts with."""
    return f"{prefix}-r{owner}"


def probe_id(prefix: str) -> str:
    """The id the driver initialises to learn that the coordinator accepts the write's settings."""
    return f"{prefix}-probe"


def new_run() -> str:
    """A run id of its own for a write (or a streaming query's run) of an owner."""
    return uuid.uuid4().hex[:RUN_DIGITS]
