"""The coordination servers barnabas runs on, started for tests and benchmarks: etcd, ZooKeeper,
PostgreSQL and Cassandra, each a thin user of ``barnabas.testing.process``."""
