"""Engine kind ``openai``: any OpenAI-compatible streaming server (see :mod:`.engine`).

Layers: :mod:`.engine` (arguments, payload, error wording), :mod:`.transport` (the protocol a
client follows), :mod:`.transport_raw` over :mod:`.http1` (our own HTTP/1.1 client, the measuring
path) and :mod:`.transport_aiohttp`, and :mod:`.sse` (events and their decoders).
"""

from .engine import OpenAIEngine, create

__all__ = ["OpenAIEngine", "create"]
