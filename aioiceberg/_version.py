"""The package version, in a module of its own so that any layer can name it without the package root."""

__version__ = "0.1.0"
