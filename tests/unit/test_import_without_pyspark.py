"""Without pyspark the producer works and the Spark layer says which extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
