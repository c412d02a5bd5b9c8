"""Change data capture: the application's user table and the connector that streams it into
the `profiles` topic (Debezium's Postgres connector on Kafka Connect)."""
