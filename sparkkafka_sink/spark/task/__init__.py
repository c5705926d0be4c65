"""What runs in a write task: Spark's Arrow batches in, records to Kafka, a commit message out.

``write_task`` runs it: ``batches`` (coalesced, paced by ``rate_limit``) go as a ``part`` through
``routing`` (rows without a topic out, ``encoders``, one ``send_batch`` per topic) to the ``task_producer``
(configured for this attempt, from the ``producer_pool`` or new); ``delivery`` decides each row's fate (what
the producer reports, and the rows refused on the way), handing the bad rows to ``dead_letters``.  Only the tasks import this package (``SinkWriter.write``),
so its modules import pyarrow, numpy and the producer at the top.
"""
