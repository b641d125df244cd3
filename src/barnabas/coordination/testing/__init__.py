"""Test kits for coordination backends: contract checks, linearizability, fault injection.

- ``contract``: the checks every backend must pass (tests/contract parametrises them per backend).
- ``outages``: the checks of a backend whose server is killed, frozen, restarted or not there.
- ``linearizability``: record concurrent Storage histories and check them, Porcupine-style.
- ``faults``: a Metastore wrapper injecting delays, failures, partitions and lease expiry.
- ``member``: the subprocess the kill -9 checks start and kill.
"""
