"""The control-request handlers without a broker: what each answer means (the one retry policy),
what a handler hands its owner, and the coordinator lookup they share.  The Sender and the
blocking admin drive them against brokers: tests/unit/test_sender_fake_broker.py,
tests/exactly_once and tests/failover."""

from __future__ import annotations

import pytest

from sparkkafka_sink.errors import KafkaError, ProducerFencedError
from sparkkafka_sink.producer.control_requests import (
    AddPartitionsToTxn,
    Coordinators,
    DescribeTransactions,
    EndTxn,
    FindCoordinator,
    InitProducerId,
    ListTransactions,
    Outcome,
    TopicCheckError,
    TopicMetadata,
    outcome_of,
)
from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.producer.transaction_manager import TransactionManager, TransactionState
from sparkkafka_sink.protocol import error_codes as perr
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import ApiKey, transactions_max_version


def code(name: str) -> int:
    return perr.ERROR_NAMES[name].code


def answer(name: str, **fields):
    return messages.schema_of(name).cls(**fields)


def struct(message: str, struct_name: str, **fields):
    return messages.schema_of(message).structs[struct_name].cls(**fields)


def test_one_retry_policy_from_the_error_table():
    assert outcome_of(perr.ERROR_NAMES["NOT_COORDINATOR"]()) is Outcome.FIND_COORDINATOR
    assert outcome_of(perr.ERROR_NAMES["COORDINATOR_NOT_AVAILABLE"]()) is Outcome.FIND_COORDINATOR
    assert outcome_of(perr.ERROR_NAMES["CONCURRENT_TRANSACTIONS"]()) is Outcome.RETRY
    assert outcome_of(perr.ERROR_NAMES["COORDINATOR_LOAD_IN_PROGRESS"]()) is Outcome.RETRY
    assert outcome_of(perr.ERROR_NAMES["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]()) is Outcome.FATAL
    assert outcome_of(perr.ERROR_NAMES["PRODUCER_FENCED"]()) is Outcome.FATAL


def test_find_coordinator_reads_both_answer_shapes_and_records_the_node():
    coordinators = Coordinators()
    old = coordinators.lookup("tx")
    assert old.handle(answer("FindCoordinatorResponse", error_code=0, node_id=3)) is Outcome.DONE
    assert coordinators.node("tx") == 3
    coordinators.forget("tx")
    new = coordinators.lookup("tx")
    body = answer("FindCoordinatorResponse", coordinators=[
        struct("FindCoordinatorResponse", "Coordinator", key="tx", node_id=5, error_code=0)])
    assert new.handle(body) is Outcome.DONE and coordinators.node("tx") == 5
    # a lookup sent to any broker is asked again, never "find the coordinator" of itself
    busy = answer("FindCoordinatorResponse", error_code=code("COORDINATOR_NOT_AVAILABLE"), node_id=-1)
    assert FindCoordinator("tx").handle(busy) is Outcome.RETRY
    refused = FindCoordinator("tx")
    assert refused.handle(answer("FindCoordinatorResponse", error_code=code("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
                                 node_id=-1)) is Outcome.FATAL
    assert "FindCoordinator for 'tx'" in str(refused.error)


def test_init_producer_id_for_an_idempotent_and_a_transactional_producer():
    idempotent = InitProducerId(None, 60000)
    assert idempotent.coordinator_key is None  # any broker
    assert idempotent.build().transactional_id is None and idempotent.build().producer_id == -1
    assert idempotent.handle(answer("InitProducerIdResponse", error_code=0, producer_id=7, producer_epoch=0)) \
        is Outcome.DONE and idempotent.result == (7, 0)
    # no coordinator to look up without a transactional id: asked again
    assert InitProducerId(None, 60000).handle(answer("InitProducerIdResponse",
                                                     error_code=code("COORDINATOR_NOT_AVAILABLE"))) is Outcome.RETRY
    bump = InitProducerId("tx", 1000, producer_id=7, producer_epoch=3)
    assert bump.coordinator_key == "tx"
    assert (bump.build().producer_id, bump.build().producer_epoch, bump.build().transaction_timeout_ms) == (7, 3, 1000)
    assert bump.handle(answer("InitProducerIdResponse", error_code=code("NOT_COORDINATOR"))) is Outcome.FIND_COORDINATOR
    fenced = InitProducerId("tx", 1000)
    assert fenced.handle(answer("InitProducerIdResponse", error_code=code("PRODUCER_FENCED"))) is Outcome.FATAL
    assert isinstance(fenced.error, ProducerFencedError) and "'tx' was fenced" in str(fenced.error)
    too_long = InitProducerId("tx", 3_600_000)
    assert too_long.handle(answer("InitProducerIdResponse", error_code=code("INVALID_TRANSACTION_TIMEOUT"))) \
        is Outcome.FATAL
    assert isinstance(too_long.error, perr.InvalidTransactionTimeoutError)
    assert "transaction.timeout.ms=3600000" in str(too_long.error) and "transaction.max.timeout.ms" in str(too_long.error)
    no_id = InitProducerId(None, 60000)
    assert no_id.handle(answer("InitProducerIdResponse", error_code=0, producer_id=-1, producer_epoch=-1)) \
        is Outcome.FATAL and "producer id -1" in str(no_id.error)


def test_a_lost_answer_looks_the_coordinator_up_again_and_any_broker_is_just_asked_again():
    assert InitProducerId("tx", 1000).no_answer(KafkaError("connection lost")) is Outcome.FIND_COORDINATOR
    assert InitProducerId(None, 1000).no_answer(KafkaError("connection lost")) is Outcome.RETRY
    told = []
    handler = EndTxn("tx", 1, 0, True, False, on_outcome=lambda h, o: told.append(o))
    handler.no_answer(None)
    handler.give_up(KafkaError("no coordinator"))
    assert told == [Outcome.FIND_COORDINATOR, Outcome.FATAL] and str(handler.error) == "no coordinator"


def test_add_partitions_keeps_what_joined_and_asks_again_for_the_rest():
    handler = AddPartitionsToTxn("tx", 7, 0, {("a", 0), ("a", 1), ("b", 0)})
    request = handler.build()
    assert sorted((t.name, tuple(t.partitions)) for t in request.v3_and_below_topics) == [("a", (0, 1)), ("b", (0,))]
    result = struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnPartitionResult", partition_index=1,
                    partition_error_code=code("CONCURRENT_TRANSACTIONS"))
    ok = struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnPartitionResult", partition_index=0,
                partition_error_code=0)
    topics = [struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnTopicResult", name="a",
                     results_by_partition=[ok, result]),
              struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnTopicResult", name="b",
                     results_by_partition=[ok])]
    assert handler.handle(answer("AddPartitionsToTxnResponse", results_by_topic_v3_and_below=topics)) is Outcome.RETRY
    assert handler.result == {("a", 0), ("b", 0)} and handler.failed == {("a", 1)}
    lost = AddPartitionsToTxn("tx", 7, 0, {("a", 0)})
    lost.no_answer(None)
    assert lost.result == set() and lost.failed == {("a", 0)}


def test_end_txn_caps_transactions_v1_and_reads_the_bumped_epoch_of_v2():
    v1 = EndTxn("tx", 7, 2, True, transaction_v2=False)
    assert v1.max_version == 4 and v1.build().committed
    assert v1.handle(answer("EndTxnResponse", error_code=0, producer_id=-1, producer_epoch=-1)) is Outcome.DONE
    assert v1.result is None
    v2 = PreparedTransaction("tx", 7, 2, (("t", 0),), transaction_v2=True).end_request(commit=False)
    assert v2.max_version is None and not v2.build().committed
    assert v2.handle(answer("EndTxnResponse", error_code=0, producer_id=7, producer_epoch=3)) is Outcome.DONE
    assert v2.result == (7, 3)
    fenced = EndTxn("tx", 7, 2, True, False)
    assert fenced.handle(answer("EndTxnResponse", error_code=code("INVALID_PRODUCER_EPOCH"))) is Outcome.FATAL
    assert isinstance(fenced.error, ProducerFencedError)


def _described(state: str | None, epoch: int = 0, producer_id: int = 9):
    """A DescribeTransactions answer: the id in ``state`` at ``epoch``, or unknown (None)."""
    if state is None:
        found = struct("DescribeTransactionsResponse", "TransactionState", transactional_id="tx-decision",
                       error_code=code("TRANSACTIONAL_ID_NOT_FOUND"))
    else:
        found = struct("DescribeTransactionsResponse", "TransactionState", error_code=0, transactional_id="tx-decision",
                       transaction_state=state, producer_id=producer_id, producer_epoch=epoch,
                       transaction_timeout_ms=60000, transaction_start_time_ms=-1, topics=[])
    return answer("DescribeTransactionsResponse", transaction_states=[found])


def test_an_unanswered_first_initialisation_is_read_back_rather_than_made_again():
    """``resume_lost``: once its request went unanswered, InitProducerId asks DescribeTransactions
    before it asks again: an idle id at epoch 0 is its own answer; an unknown id, or one further
    on, is initialised again (and the epoch then says it was not the first)."""
    resumed = InitProducerId("tx-decision", 60000, resume_lost=True)
    assert type(resumed.build()).__name__ == "InitProducerIdRequest"
    assert resumed.no_answer(KafkaError("connection lost")) is Outcome.FIND_COORDINATOR
    asked = resumed.build()
    assert type(asked).__name__ == "DescribeTransactionsRequest" and asked.transactional_ids == ["tx-decision"]
    assert "DescribeTransactions" in resumed.describe()
    # the question unanswered too, or the coordinator moved: asked again, still the question
    assert resumed.no_answer(KafkaError("connection lost")) is Outcome.FIND_COORDINATOR
    busy = answer("DescribeTransactionsResponse", transaction_states=[struct(
        "DescribeTransactionsResponse", "TransactionState", transactional_id="tx-decision",
        error_code=code("NOT_COORDINATOR"))])
    assert resumed.handle(busy) is Outcome.FIND_COORDINATOR
    assert type(resumed.build()).__name__ == "DescribeTransactionsRequest"
    assert resumed.handle(_described("Empty", 0)) is Outcome.DONE
    assert resumed.result == (9, 0) and resumed.resumed

    for state, epoch in ((None, 0), ("Empty", 1), ("Ongoing", 0), ("CompleteCommit", 0)):
        again = InitProducerId("tx-decision", 60000, resume_lost=True)
        again.no_answer(KafkaError("connection lost"))
        assert again.handle(_described(state, epoch)) is Outcome.RETRY, (state, epoch)
        assert type(again.build()).__name__ == "InitProducerIdRequest"  # initialised again
        assert again.handle(answer("InitProducerIdResponse", error_code=0, producer_id=9, producer_epoch=epoch + 1)) \
            is Outcome.DONE and again.result == (9, epoch + 1) and not again.resumed

    plain = InitProducerId("tx-decision", 60000)  # without resume_lost: asked again as it was
    plain.no_answer(KafkaError("connection lost"))
    assert type(plain.build()).__name__ == "InitProducerIdRequest"
    # a producer's own epoch bump (KIP-360) never resumes: it holds its producer id already
    tm = TransactionManager("tx-decision", 60000)
    first = tm.initialize(resume_lost=True)
    init = tm.next_request(lambda: False)
    assert isinstance(init, InitProducerId) and init.resume_lost
    init.no_answer(KafkaError("connection lost"))
    assert tm.next_request(lambda: False) is init  # the same handler is sent again: its question first
    init.handle(_described("Empty", 0, producer_id=12))
    first.wait(1)
    assert (tm.producer_id, tm.producer_epoch, tm.state) == (12, 0, TransactionState.READY)
    assert not tm._init_request(resume_lost=True).resume_lost


def test_describe_and_list_transactions():
    topics = [struct("DescribeTransactionsResponse", "TopicData", topic="t", partitions=[0, 2])]
    state = struct("DescribeTransactionsResponse", "TransactionState", error_code=0, transactional_id="tx",
                   transaction_state="Ongoing", producer_id=7, producer_epoch=3, transaction_timeout_ms=60000,
                   transaction_start_time_ms=1_700_000_000_000, topics=topics)
    handler = DescribeTransactions("tx")
    assert handler.handle(answer("DescribeTransactionsResponse", transaction_states=[state])) is Outcome.DONE
    assert handler.result == ("Ongoing", 7, 3, 60000, 1_700_000_000_000, (("t", 0), ("t", 2)))
    unknown = struct("DescribeTransactionsResponse", "TransactionState", error_code=code("TRANSACTIONAL_ID_NOT_FOUND"),
                     transactional_id="tx")
    handler = DescribeTransactions("tx")
    assert handler.handle(answer("DescribeTransactionsResponse", transaction_states=[unknown])) is Outcome.DONE
    assert handler.result is None
    listing = ListTransactions("job-", ["Ongoing"])
    states = [struct("ListTransactionsResponse", "TransactionState", transactional_id=t, producer_id=i,
                     transaction_state="Ongoing") for i, t in enumerate(["job-1", "other", "job-2"])]
    assert listing.build().state_filters == ["Ongoing"]
    assert listing.handle(answer("ListTransactionsResponse", error_code=0, transaction_states=states)) is Outcome.DONE
    assert listing.result == [("job-1", 0, "Ongoing"), ("job-2", 2, "Ongoing")]


def _topic(name: str, error: str | None = None, partitions: int = 1, ops: int = -2147483648):
    parts = [struct("MetadataResponse", "MetadataResponsePartition", partition_index=i, error_code=0, leader_id=1)
             for i in range(partitions)]
    return struct("MetadataResponse", "MetadataResponseTopic", name=name, error_code=code(error) if error else 0,
                  partitions=parts, topic_authorized_operations=ops)


def _topics_answer(*topics):
    return answer("MetadataResponse", brokers=[], topics=list(topics))


def test_topic_metadata_is_done_once_every_topic_may_be_written():
    check = TopicMetadata(["b", "a", "b"])
    request = check.build()
    assert [t.name for t in request.topics] == ["a", "b"] and not request.allow_auto_topic_creation
    assert request.include_topic_authorized_operations
    assert check.handle(_topics_answer(_topic("a", partitions=3), _topic("b"))) is Outcome.DONE
    assert check.result == {"a": 3, "b": 1}


@pytest.mark.parametrize("topic, auto_create, message", [
    (_topic("a", "UNKNOWN_TOPIC_OR_PARTITION"), False, "topic 'a' does not exist (allow.auto.create.topics is false)"),
    (_topic("a", "TOPIC_AUTHORIZATION_FAILED"), False, "not authorized to access topic 'a'"),
    (_topic("a", "INVALID_TOPIC_EXCEPTION"), False, "'a' is not a valid topic name"),
    (_topic("a", ops=1 << 3), False, "not authorized to write to topic 'a'"),  # READ only: no WRITE bit
])
def test_topic_metadata_names_what_makes_a_topic_unwritable(topic, auto_create, message):
    check = TopicMetadata(["a"], auto_create)
    # UNKNOWN_TOPIC_OR_PARTITION is retriable in the error table: for a write's check it is final
    assert check.handle(_topics_answer(topic)) is Outcome.FATAL
    assert isinstance(check.error, TopicCheckError) and message in str(check.error)


def test_topic_metadata_asks_again_while_a_topic_is_being_created():
    check = TopicMetadata(["a", "b"], allow_auto_create=True)
    # KRaft answers the request that starts the creation with UNKNOWN_TOPIC_OR_PARTITION
    assert check.handle(_topics_answer(_topic("a"), _topic("b", "UNKNOWN_TOPIC_OR_PARTITION"))) is Outcome.RETRY
    assert check.handle(_topics_answer(_topic("a"), _topic("b", partitions=0))) is Outcome.RETRY
    assert check.handle(_topics_answer(_topic("a"), _topic("b", "LEADER_NOT_AVAILABLE"))) is Outcome.RETRY
    assert check.handle(_topics_answer(_topic("a"), _topic("b"))) is Outcome.DONE
    # a broker that does not auto-create keeps saying it: taken for missing after a few answers
    never = TopicMetadata(["b"], allow_auto_create=True)
    outcomes = [never.handle(_topics_answer(_topic("b", "UNKNOWN_TOPIC_OR_PARTITION")))
                for _ in range(TopicMetadata.AUTO_CREATE_ANSWERS)]
    assert outcomes == [Outcome.RETRY] * (TopicMetadata.AUTO_CREATE_ANSWERS - 1) + [Outcome.FATAL]
    assert isinstance(never.error, TopicCheckError)
    assert "topic 'b' does not exist and the brokers do not create topics on demand" in str(never.error)
    # any other answer goes by the one policy: a final one fails the check with the broker's error
    refused = TopicMetadata(["a"])
    assert refused.handle(_topics_answer(_topic("a", "POLICY_VIOLATION"))) is Outcome.FATAL
    assert isinstance(refused.error, perr.PolicyViolationError)


def test_transaction_manager_asks_questions_between_its_own_requests():
    tm = TransactionManager("tx", 1000)
    result = tm.initialize()
    asked = tm.describe("other")
    init = tm.next_request(lambda: False)
    assert isinstance(init, InitProducerId)  # the producer's own step first
    init.handle(answer("InitProducerIdResponse", error_code=0, producer_id=9, producer_epoch=0))
    result.wait(1)
    question = tm.next_request(lambda: False)
    assert isinstance(question, DescribeTransactions) and question.coordinator_key == "other"
    question.no_answer(None)  # the Sender looks the coordinator up again and re-sends this one
    state = struct("DescribeTransactionsResponse", "TransactionState", error_code=0, transactional_id="other",
                   transaction_state="Empty")
    question.handle(answer("DescribeTransactionsResponse", transaction_states=[state]))
    assert asked.wait(1) == "Empty" and tm.next_request(lambda: False) is None
    refused = tm.describe("secret")
    tm.next_request(lambda: False).handle(answer("DescribeTransactionsResponse", transaction_states=[
        struct("DescribeTransactionsResponse", "TransactionState", transactional_id="secret",
               error_code=code("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"))]))
    with pytest.raises(perr.TransactionalIdAuthorizationFailedError):
        refused.wait(1)
    assert tm.fatal_error is None and tm.state is TransactionState.READY  # a question never fails the producer
    pending = tm.describe("late")
    tm.fail_fatally(KafkaError("fenced"))
    with pytest.raises(KafkaError, match="fenced"):
        pending.wait(1)


def test_transaction_manager_hands_out_its_steps_as_handlers():
    tm = TransactionManager("tx", 1000)
    assert tm.next_request(lambda: False) is None  # nothing asked yet
    result = tm.initialize()
    init = tm.next_request(lambda: False)
    assert isinstance(init, InitProducerId) and init.coordinator_key == "tx" and init.producer_id == -1
    init.handle(answer("InitProducerIdResponse", error_code=0, producer_id=9, producer_epoch=0))
    result.wait(1)
    assert tm.state is TransactionState.READY and (tm.producer_id, tm.producer_epoch) == (9, 0)
    tm.begin()
    tm.check_can_send("t", 0)
    add = tm.next_request(lambda: False)
    assert isinstance(add, AddPartitionsToTxn) and add.partitions == {("t", 0)}
    add.no_answer(None)  # its partitions wait for the next attempt
    add = tm.next_request(lambda: False)
    assert add.partitions == {("t", 0)}
    ok = struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnPartitionResult", partition_index=0,
                partition_error_code=0)
    add.handle(answer("AddPartitionsToTxnResponse", results_by_topic_v3_and_below=[
        struct("AddPartitionsToTxnResponse", "AddPartitionsToTxnTopicResult", name="t", results_by_partition=[ok])]))
    tm.batch_failed(KafkaError("refused"))  # transactions v1: the abort must end with a new epoch
    ended = tm.end(commit=False)
    end = tm.next_request(lambda: False)
    assert isinstance(end, EndTxn) and not end.commit and end.max_version == 4
    end.handle(answer("EndTxnResponse", error_code=0))
    bump = tm.next_request(lambda: False)
    assert isinstance(bump, InitProducerId) and (bump.producer_id, bump.producer_epoch) == (9, 0)
    bump.handle(answer("InitProducerIdResponse", error_code=0, producer_id=9, producer_epoch=1))
    ended.wait(1)
    assert tm.state is TransactionState.READY and tm.producer_epoch == 1


def test_a_fatal_answer_makes_the_transaction_manager_unusable():
    tm = TransactionManager("tx", 1000)
    result = tm.initialize()
    tm.next_request(lambda: False).handle(answer("InitProducerIdResponse",
                                         error_code=code("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")))
    with pytest.raises(perr.TransactionalIdAuthorizationFailedError, match="InitProducerId for 'tx'"):
        result.wait(1)
    assert tm.state is TransactionState.FATAL and tm.next_request(lambda: False) is None
    with pytest.raises(perr.TransactionalIdAuthorizationFailedError):
        tm.begin()


def test_a_transaction_takes_the_cluster_transaction_version_when_it_begins():
    """What the Sender caps Produce with (``transactions_max_version``): v11 under transactions
    v1, none under v2 -- the version the cluster had when the transaction began."""
    tm = TransactionManager("tx", 1000)
    tm.set_producer_id(7, 0)
    tm.state = TransactionState.READY
    tm.cluster_features({"transaction.version": 2})
    tm.begin()
    assert transactions_max_version(ApiKey.PRODUCE, tm.transaction_v2) is None
    tm.cluster_features({"transaction.version": 1})  # the open transaction keeps its version
    assert tm.transaction_v2
    tm.end(commit=False)
    tm.begin()
    assert transactions_max_version(ApiKey.PRODUCE, tm.transaction_v2) == 11
