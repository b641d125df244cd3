"""The shipped telemetry pipeline: `generator` makes device readings, `job` runs the Structured Streaming job.

Run it with `barnabas pipeline run telemetry --bootstrap HOST:PORT --out DIR`; see `job` for its queries
and their delivery guarantees.
"""
