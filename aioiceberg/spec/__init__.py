"""The Iceberg format: pure, synchronous model objects and their on-disk encodings. No I/O."""
