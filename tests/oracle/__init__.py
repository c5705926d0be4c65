"""The Java client (kafka-clients, the broker's version) as a byte-level oracle for our encoder,
decoder and partitioner; the Java programs are in ``java/`` and compiled once per session."""
