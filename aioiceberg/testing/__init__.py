"""Helpers for testing and load-testing code that uses aioiceberg."""
