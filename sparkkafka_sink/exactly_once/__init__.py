"""Exactly-once writes: who owns a write's transactions, its one recorded decision, and how
anyone ends it as decided.

Between the Spark layer and the producer: the driver's commit (``commit``), the tasks' check
that their write is open (``fence``), the decision kept in Kafka (``decision``,
``decision_log``), ending a write as decided (``settle``), the owners' liveness (``owner``,
``leases``), the driver's keeper (``keeper``) and the operator's command (``command``).  The
names of the transactional ids are in ``ids``.  Nothing here imports pyspark.
"""
