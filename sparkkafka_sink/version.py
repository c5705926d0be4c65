"""The package's version, at the bottom of the layers: the brokers see it in every ApiVersions
request, packaging reads it (pyproject.toml), and nothing below the package's ``__init__`` has
to import that ``__init__`` to know it."""

__version__ = "0.2.0"
