"""An OpenAI engine that blocks its event loop ``hog_s`` seconds per request (a client starved by
design, deterministically: a blocking sleep on the loop's thread holds the loop as a CPU-bound parse
would, without taking a core from a busy machine, so the lag it causes does not depend on the
machine's load), rebuilt as such in a client worker process (``worker_spec`` carries ``hog_s``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pytest_perfgate.contract import Clock, Request, RequestRecord
from pytest_perfgate.engines.openai import OpenAIEngine


class HogEngine(OpenAIEngine):
    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        own = dict(args)
        self.hog_s = float(own.pop("hog_s", 0.0))
        super().__init__(name, own)
        self._args = dict(args)  # the worker's copy busy-waits too

    async def generate(self, request: Request, record: RequestRecord, clock: Clock) -> None:
        await super().generate(request, record, clock)
        time.sleep(self.hog_s)  # noqa: ASYNC251 - the point: the loop is held
