"""Shared core: settings, events, validation, view logic, oracle, workload, Kafka and Spark I/O."""
