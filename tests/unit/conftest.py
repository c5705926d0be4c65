"""The fake broker's fixtures (``fake_broker.py``) for the unit tests that script a broker's
answers: ``cluster``, ``make_broker``, ``broker``, ``make_producer``."""

from fake_broker import broker, cluster, make_broker, make_producer  # noqa: F401  (fixtures, registered here)
