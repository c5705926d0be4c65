"""What runs on the driver: planning and checking a write before its tasks, ending it after them.

``planning`` (options, schema via ``validation``, ``cluster_check``), ``commit`` (Spark's
``commit()``/``abort()``: summaries, and under exactly-once ``transactions``, the Spark side of
``sparkkafka_sink.exactly_once``).  Spark runs these in short-lived Python processes of the driver, so
the network stack is imported only where a step asks the cluster.
"""
