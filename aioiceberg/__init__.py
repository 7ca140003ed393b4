"""aioiceberg: an asyncio, object-store-first storage engine for Apache Iceberg tables."""

__version__ = "0.1.0"
