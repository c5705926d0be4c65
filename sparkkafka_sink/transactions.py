"""``python -m sparkkafka_sink.transactions``: the operator's command for the sink's open
writes (``exactly_once/command.py``), under the name the docs give it."""

from sparkkafka_sink.exactly_once.command import SINK_PREFIX, SinkTransaction, abort_dead, list_open, main

__all__ = ["SINK_PREFIX", "SinkTransaction", "list_open", "abort_dead", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
