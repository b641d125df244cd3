"""Client-interoperability drivers: one program per Kafka client family, one shared checker."""
