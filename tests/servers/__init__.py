"""Real servers for tests and benchmarks: moto, LocalStack host mode, a fault proxy."""
