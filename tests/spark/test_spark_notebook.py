"""notebooks/quickstart.ipynb runs top to bottom (its own SparkSession in a fresh kernel) against
the test broker; its cells assert that every record landed."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_kinds import KAFKA_KINDS

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark in processes of their own


@pytest.mark.uses("schema_registry")  # asked for at run time, when a registry can run here
def test_quickstart_notebook_executes(kafka, tmp_path, monkeypatch, request):
    if kafka.kind != KAFKA_KINDS[0]:
        pytest.skip(f"the notebook does not depend on the broker: run once, on {KAFKA_KINDS[0]}")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka.bootstrap_servers)
    from sparkkafka_sink.testing.schema_registry import registry_unavailable_reason

    avro = registry_unavailable_reason() is None  # the session's registry for the Avro section
    if avro:
        monkeypatch.setenv("SCHEMA_REGISTRY_URL", request.getfixturevalue("schema_registry").url)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot cell rendered no image"
    assert any("records_sent" in str(o.get("data", {})) for o in outputs), "no metrics table"
    if avro:  # the Avro section's table of orders read back through the registry
        assert any("customer-" in str(o.get("data", {})) for o in outputs), "no orders read back"
        # the Protobuf section: the registered schema printed, its orders read back (a table each)
        assert any("message Order {" in str(o.get("text", "")) for o in outputs), "no Protobuf schema registered"
        assert sum("customer-" in str(o.get("data", {})) for o in outputs) == 2, "no Protobuf orders read back"
