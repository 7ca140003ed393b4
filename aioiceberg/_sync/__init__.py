"""Machinery behind the blocking facade (aioiceberg.sync)."""
