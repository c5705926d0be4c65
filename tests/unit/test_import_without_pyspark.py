"""Without pyspark the producer works and the Spark layer says which extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_spark_layer_names_the_extra_when_pyspark_is_missing():
    code = textwrap.dedent("""
        import sys
        sys.modules["pyspark"] = None  # as if not installed
        from sparkkafka_sink import Producer  # the producer needs no Spark
        try:
            import sparkkafka_sink.spark
        except ImportError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'sparkkafka-sink[spark]'" in out.stdout and "[demo]" in out.stdout


@pytest.mark.parametrize("module", ["pyspark_pyprod_kafka", "sparkkafka_sink.spark.writer",
                                    "sparkkafka_sink.spark.stream_writer", "sparkkafka_sink.spark.driver.planning",
                                    "sparkkafka_sink.spark.driver.write_end"])
def test_driver_side_processes_import_neither_numpy_nor_pyarrow_nor_the_producer(module):
    """Spark imports every top-level ``pyspark_*`` module in a Python process of its own at each
    data-source lookup, and unpickles the writer in another to commit: each pays our imports,
    so they stay light there (the tasks import the rest when they write)."""
    code = textwrap.dedent(f"""
        import sys
        import pyspark.sql.datasource
        before = set(sys.modules)
        import {module}
        print(" ".join(sorted(set(sys.modules) - before)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert module in loaded
    heavy = [m for m in loaded if m.split(".")[0] in ("numpy", "pyarrow", "crc32c", "lz4", "zstandard", "cramjam")
             or m.startswith(("sparkkafka_sink.record", "sparkkafka_sink.network", "sparkkafka_sink.protocol"))]
    assert heavy == [], heavy


def test_headers_type_in_spark_words_matches_the_arrow_declaration():
    from sparkkafka_sink.record.arrow import HEADERS_TYPE
    from sparkkafka_sink.spark.driver.validation import HEADERS_SQL

    spelled = "array<struct<" + ",".join(f"{f.name}:{f.type}" for f in HEADERS_TYPE.value_type) + ">>"
    assert HEADERS_SQL == spelled
