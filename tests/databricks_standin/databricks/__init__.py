"""A stand-in of the ``databricks`` namespace of Databricks' runtime: only its
``service_credentials`` module (see there).  Put this directory on PYTHONPATH to use it."""
