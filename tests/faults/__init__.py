"""Failure-semantics tests and their fault-injection harness (import it as ``from .harness import ...``)."""
