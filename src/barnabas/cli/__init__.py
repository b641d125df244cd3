"""The `barnabas` command."""

def main() -> int:
    raise NotImplementedError

