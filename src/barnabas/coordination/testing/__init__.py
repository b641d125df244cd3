"""Test kits for coordination backends: contract checks, linearizability, fault injection."""
