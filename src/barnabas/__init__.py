"""barnabas: a Kafka-wire-compatible, replicated message broker with pluggable coordination."""

__version__ = "0.1.0"
