"""The broker: an asyncio shell around the sans-IO codec, one handler module per API domain."""

from .server import Broker

__all__ = ["Broker"]
