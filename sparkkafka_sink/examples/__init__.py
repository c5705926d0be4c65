"""Runnable examples; ``pipeline.py`` is the spark-submit job shown in the README."""
