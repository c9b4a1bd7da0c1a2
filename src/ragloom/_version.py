"""The package version, single source of truth for pyproject and the index manifest."""

__version__ = "0.1.0"
