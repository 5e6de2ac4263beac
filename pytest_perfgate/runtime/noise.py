"""Third-party import noise that says nothing to the user, dropped in perfgate's own processes.

Each rule names one logger and one message of a library we import (through torch, vLLM, torchao),
and drops that record only; every other record of that logger, and every other logger, is left as
it is, so a real error still shows. Installed once per process (:func:`install`) by the plugin and by
the ``perfgate`` command before it runs anything (``perfgate models make`` in set-up imports torchao
through transformers; ``models/make.py`` also hides transformers' shard-writing progress bar).

============================  ===========================================================  ==========
logger                        message                                                      dropped
============================  ===========================================================  ==========
``torchao``                   ``Failed to load .../torchao/_C_*.so: Could not load this    where no
                              library ...`` (torchao's CUDA kernels, at import)            NVIDIA GPU
``torch.utils._pytree``       ``<enum ...> is an Enum subclass and is now natively         always
                              supported by torch.compile ... register_constant() on Enum
                              subclasses is deprecated`` (torchao registers its enums: a
                              deprecation for torchao's authors)
============================  ===========================================================  ==========

perfgate no longer calls torch.ao's deprecated ``quantize_dynamic`` (``vision/quant.py`` quantizes
through torchao), so nothing of it is silenced. :data:`WARNING_FILTERS` are pytest ``filterwarnings`` lines the
plugin adds in a perfgate session: torch's deprecation of ``torch.jit.script_method``, raised inside
torch's own module while vLLM/transformers define their scripted modules (14 lines in a phase-1
warnings summary), which no user code can act on.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .device import cuda_hint


@dataclass(frozen=True)
class Rule:
    logger: str
    pattern: re.Pattern[str]
    only_without_gpu: bool = False


RULES = (
    Rule("torchao", re.compile(r"Failed to load \S*torchao/_C\S*\.so: Could not load this library"), only_without_gpu=True),
    Rule("torch.utils._pytree", re.compile(r"is an Enum subclass and is now natively supported by torch\.compile")),
)


WARNING_FILTERS = (
    r"ignore:`torch\.jit\.script_method` is deprecated:DeprecationWarning:torch\.jit\._script",
)


class _Drop(logging.Filter):
    """Drops the records of one logger whose message matches one rule."""

    def __init__(self, rule: Rule) -> None:
        super().__init__()
        self.rule = rule

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return not self.rule.pattern.search(record.getMessage())
        except Exception:  # a record whose message cannot be formatted is not ours to drop
            return True


def install() -> list[str]:
    """Add the filters (idempotent); the loggers that got one."""
    gpu = cuda_hint()
    done = []
    for rule in RULES:
        if rule.only_without_gpu and gpu:
            continue
        log = logging.getLogger(rule.logger)
        if not any(isinstance(f, _Drop) and f.rule == rule for f in log.filters):
            log.addFilter(_Drop(rule))
        done.append(rule.logger)
    return done
