"""Prompts of an exact token length, built with the served model's tokenizer.

Prompts are token-id tuples by default: the OpenAI completions API accepts a list of token ids as
``prompt``, and vLLM then uses the ids exactly as given (no BOS is added to token-id prompts), so
the server's ``usage.prompt_tokens`` equals ``n_tokens``. When the tokenizer adds a BOS token to
text (``add_bos``, detected by default), the first of the ``n_tokens`` ids is that BOS, as the
model would see it for a text prompt. Text prompts (``as_text=True``, needed for the chat API)
are decoded from ids and checked by re-encoding *with* special tokens (as vLLM tokenizes a text
completion prompt), so ``n_tokens`` includes the BOS there too; the chat template adds more.

Every prompt starts with a unique leading segment (a request number and a seeded random word)
and then reads the corpus from a distinct seeded offset, so no two prompts share a prefix-cache
block by accident. :func:`shared_prefix_prompts` shares a fixed prefix on purpose.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from importlib import resources
from typing import Any

from ..contract import Request

FALLBACK_CORPUS = (
    "The committee met on a grey morning to review the quarterly figures. Revenue had grown, but "
    "costs had grown faster, and nobody could quite explain why the shipping line had doubled. "
    "Anna asked whether the new warehouse was to blame; Peter thought the fuel surcharge was. "
    "They agreed to collect the invoices of the last six months and to meet again on Friday. "
    "Meanwhile the engineers argued about latency: the first token arrived in ninety milliseconds, "
    "yet the stream stalled whenever the batch grew past thirty requests. "
    "If a train leaves at 3 pm travelling 80 km per hour, and a second leaves an hour later at "
    "100 km per hour, the second catches up after 4 hours, 400 km from the station. "
    "Solve 3x + 7 = 22: subtract 7 to get 3x = 15, so x = 5. The sum of the first n odd numbers "
    "is n squared; the sum 1 + 2 + ... + n is n(n + 1)/2. "
)

_WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "iris", "jade",
          "kelp", "lumen", "maple", "nadir", "onyx", "pylon", "quartz", "raven", "sable", "tundra")


def load_corpus(name: str) -> str:
    """Text of ``pytest_perfgate/models/corpus/<name>.txt``; the built-in fallback if missing."""
    try:
        text = resources.files("pytest_perfgate").joinpath("models", "corpus", f"{name}.txt").read_text("utf-8")
    except (FileNotFoundError, OSError, ModuleNotFoundError):
        return FALLBACK_CORPUS
    return text if text.strip() else FALLBACK_CORPUS


def _encode(tok: Any, text: str, special: bool = False) -> list[int]:
    """Token ids of ``text`` by a Hugging Face tokenizer or a raw ``tokenizers.Tokenizer``."""
    out = tok.encode(text, add_special_tokens=special)
    ids = out.ids if hasattr(out, "ids") else out
    return [int(i) for i in ids]


def _decode(tok: Any, ids: Sequence[int]) -> str:
    return str(tok.decode(list(ids), skip_special_tokens=True))


def bos_id(tok: Any) -> int | None:
    """The BOS id the tokenizer prepends to text (None if it prepends nothing)."""
    with_special = _encode(tok, "hello", True)
    plain = _encode(tok, "hello", False)
    if len(with_special) > len(plain) and with_special[1 : 1 + len(plain)] == plain:
        return with_special[0]
    return None


class _Stream:
    """The corpus as one token stream, read cyclically from any offset."""

    def __init__(self, tok: Any, corpus: str) -> None:
        ids = _encode(tok, corpus)
        if not ids:
            ids = _encode(tok, FALLBACK_CORPUS)
        self.ids = ids

    def take(self, start: int, n: int) -> list[int]:
        ids, m = self.ids, len(self.ids)
        out: list[int] = []
        while len(out) < n:
            s = (start + len(out)) % m
            out.extend(ids[s : s + (n - len(out))])
        return out


def _unique_head(tok: Any, i: int, rnd: random.Random, tag: str) -> list[int]:
    return _encode(tok, f"[{tag or 'req'} {i} {rnd.choice(_WORDS)}{rnd.randrange(10**6)}] ")


def _fit_text(tok: Any, ids: list[int], n: int, special_len: int, filler: list[int]) -> str | None:
    """Text whose encoding (with special tokens) has exactly ``n`` tokens, starting from ``ids``."""
    body = list(ids[: n - special_len])
    for _ in range(40):
        text = _decode(tok, body)
        got = len(_encode(tok, text, True))
        if got == n:
            return text
        if got > n:
            body = body[: max(1, len(body) - (got - n))]
        else:
            body = body + filler[: n - got]
    return None


def exact_length_prompts(
    tokenizer: Any,
    n_tokens: int,
    count: int,
    seed: int = 0,
    corpus: str | None = None,
    tag: str = "",
    *,
    max_tokens: int = 128,
    as_text: bool = False,
    add_bos: bool | None = None,
    api: str = "completions",
    temperature: float = 0.0,
) -> list[Request]:
    """``count`` unique prompts of exactly ``n_tokens`` tokens (see the module docstring)."""
    if n_tokens < 1 or count < 0:
        raise ValueError(f"exact_length_prompts: n_tokens must be >= 1 and count >= 0, got {n_tokens}, {count}")
    rnd = random.Random(seed)
    stream = _Stream(tokenizer, corpus if corpus is not None else FALLBACK_CORPUS)
    bos = bos_id(tokenizer)
    use_bos = (bos is not None) if add_bos is None else add_bos
    if use_bos and bos is None:
        raise ValueError("add_bos=True but the tokenizer has no BOS token")
    out: list[Request] = []
    for i in range(count):
        head = _unique_head(tokenizer, i, rnd, tag)
        start = rnd.randrange(len(stream.ids))
        lead = [bos] if use_bos and bos is not None and not as_text else []
        need = n_tokens - len(lead)
        ids = (head + stream.take(start, need + 16))[:need]
        if as_text:
            special = len(_encode(tokenizer, "", True))
            text = None
            for attempt in range(8):
                text = _fit_text(tokenizer, ids, n_tokens, special, stream.take(start + 997 * (attempt + 1), 64))
                if text is not None:
                    break
                ids = (head + stream.take(start + attempt + 1, need + 16))[:need]
            if text is None:
                raise ValueError(f"could not build a text prompt of exactly {n_tokens} tokens")
            prompt: str | tuple[int, ...] = text
        else:
            prompt = tuple(lead + ids)
        out.append(Request(prompt=prompt, max_tokens=max_tokens, prompt_tokens=n_tokens, tag=tag,
                           api="chat" if api == "chat" else "completions", temperature=temperature))
    return out


def shared_prefix_prompts(
    tokenizer: Any,
    prefix_tokens: int,
    tail_tokens: int,
    count: int,
    seed: int = 0,
    corpus: str | None = None,
    tag: str = "shared-prefix",
    *,
    max_tokens: int = 128,
    temperature: float = 0.0,
) -> list[Request]:
    """Token-id prompts: one fixed prefix (system prompt + few-shot) of ``prefix_tokens``, then a
    unique tail of ``tail_tokens``; total length exactly ``prefix_tokens + tail_tokens``."""
    if prefix_tokens < 1 or tail_tokens < 1:
        raise ValueError("shared_prefix_prompts: prefix_tokens and tail_tokens must be >= 1")
    text = corpus if corpus is not None else FALLBACK_CORPUS
    system = "You are a careful assistant. Answer briefly and show your working.\n"
    shots = "Q: What is 2 + 3?\nA: 5\nQ: Name a primary colour.\nA: Red\n"
    bos = bos_id(tokenizer)
    fixed = ([bos] if bos is not None else []) + _encode(tokenizer, system + shots)
    stream = _Stream(tokenizer, text)
    prefix = (fixed + stream.take(0, prefix_tokens))[:prefix_tokens]
    tails = exact_length_prompts(tokenizer, tail_tokens, count, seed, text, tag, max_tokens=max_tokens, add_bos=False)
    out: list[Request] = []
    for r in tails:
        assert isinstance(r.prompt, tuple)
        out.append(Request(prompt=tuple(prefix) + r.prompt, max_tokens=max_tokens,
                           prompt_tokens=prefix_tokens + tail_tokens, tag=tag, temperature=temperature))
    return out


def dialogue_prompts(tokenizer: Any, n_tokens: int, count: int, seed: int = 0, **kw: Any) -> list[Request]:
    """Exact-length prompts read from the dialogue corpus (tag ``"dialogue"``)."""
    return exact_length_prompts(tokenizer, n_tokens, count, seed, load_corpus("dialogue"), "dialogue", **kw)


def math_prompts(tokenizer: Any, n_tokens: int, count: int, seed: int = 0, **kw: Any) -> list[Request]:
    """Exact-length prompts read from the math corpus (tag ``"math"``)."""
    return exact_length_prompts(tokenizer, n_tokens, count, seed, load_corpus("math"), "math", **kw)


WARMUP_TOKENS = 256  # warm-up prompt length only when the measured one is unknown
WARMUP_MAX_TOKENS = 4


def warmup_prompts(like: Sequence[Request], count: int, tokenizer: Any = None) -> list[Request]:
    """``count`` warm-up requests of their own, shaped like ``like[0]`` (API, sampling, output
    length, ``extra``; without ``like``: ``WARMUP_MAX_TOKENS`` output tokens): never the measured
    prompts, which would then sit in the prefix cache and make the measured TTFT a cache hit. With a
    tokenizer, exact-length token prompts of the measured length (``like[0].prompt_tokens``: the same
    shape, so the prefill path of that length is the one warmed; ``WARMUP_TOKENS`` when unknown);
    without one, text prompts from the corpus."""
    if count <= 0:
        return []
    from dataclasses import replace

    first = like[0] if like else Request(prompt="", max_tokens=WARMUP_MAX_TOKENS)
    n_tokens = first.prompt_tokens or WARMUP_TOKENS
    max_tokens = first.max_tokens
    if tokenizer is not None:
        made = exact_length_prompts(tokenizer, n_tokens, count, seed=999, tag="warm-up", max_tokens=max_tokens,
                                    as_text=isinstance(first.prompt, str) and first.api == "chat", api=first.api)
        return [replace(first, prompt=r.prompt, prompt_tokens=r.prompt_tokens, max_tokens=max_tokens, tag="warm-up")
                for r in made]
    return [replace(first, prompt=f"Warm-up request {i + 1}. {FALLBACK_CORPUS[: 4 * n_tokens]}", prompt_tokens=None,
                    max_tokens=max_tokens, tag="warm-up") for i in range(count)]
