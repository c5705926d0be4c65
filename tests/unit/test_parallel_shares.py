"""The two shares of ``pytest -n 2`` (tests/parallel.py): each test's share from its id."""

from __future__ import annotations

from pathlib import Path

from parallel import BROKERS_SHARE, SPARK_SHARE_MODULES, share_of

TESTS = Path(__file__).resolve().parents[1]


def test_a_test_goes_to_the_share_of_its_directory_unless_its_module_is_moved():
    assert share_of("tests/spark/test_spark_streaming.py::test_x[apache]") == "spark"
    assert share_of("tests/faults/test_fault_cuts.py::test_y") == "brokers"
    assert share_of("tests/unit/test_record_arrow.py::test_z") == "brokers"
    assert share_of("tests/test_infra_brokers.py::test_w") == "brokers"
    for module in SPARK_SHARE_MODULES:
        assert share_of(f"tests/{module}::test_v") == "spark"


def test_every_module_moved_between_shares_exists():
    """A module renamed would silently go back to its directory's share."""
    for module in SPARK_SHARE_MODULES:
        assert (TESTS / module).is_file(), module
        assert module.split("/")[0] in BROKERS_SHARE, f"{module} is in the first share anyway"
