"""Which dialect of the OpenAI API a server speaks: vLLM's extensions only where the server takes them.

vLLM (and SGLang) accept fields the OpenAI spec does not have: ``ignore_eos`` (exact output lengths),
``stream_options.continuous_usage_stats`` (cumulative usage in every chunk: exact tokens per chunk)
and token-id prompts (``"prompt": [ids]``: exact prompt lengths). A strict OpenAI-spec server
answers ``400 Unrecognized request argument supplied: ignore_eos``; ``transformers serve`` answers
``422 Unexpected fields in the request: {'ignore_eos'}`` and ``400 prompt must be a string.``.
``min_tokens`` is another such extension; perfgate never sends it (``ignore_eos`` covers it).

A :class:`Dialect` holds what may be sent. ``dialect = "vllm"`` sends every extension, ``"openai"``
none (token-id prompts become text), ``"auto"`` (the default) starts from vLLM's and learns: the
engine's start probes the server with one-token requests (:mod:`.ready`), and a 400/422 naming one
of those fields (:func:`rejected`), at start or later, drops it for the rest of the session; each
change is said once (:attr:`Dialect.notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from ...runtime.redaction import clean

SETTINGS = ("auto", "vllm", "openai")
IGNORE_EOS = "ignore_eos"
CONTINUOUS = "continuous_usage_stats"
STREAM_OPTIONS = "stream_options"
TOKEN_IDS = "token-id prompts"
# ``include_usage`` is in the OpenAI spec, but a server that names ``stream_options`` rejects it whole
_FIELDS = (IGNORE_EOS, CONTINUOUS, STREAM_OPTIONS, "min_tokens")


@dataclass
class Dialect:
    """What one server accepts (``setting``: the ``dialect`` argument; only ``"auto"`` learns)."""

    setting: str = "auto"
    ignore_eos: bool = True
    continuous_usage_stats: bool = True
    stream_options: bool = True
    token_ids: bool = True
    done: bool | None = None  # did the probe's stream end with ``data: [DONE]`` (None: not probed)
    decided: str = ""  # how the dialect was chosen, one line
    notes: list[str] = field(default_factory=list)  # what was learned, each said once

    @classmethod
    def of(cls, setting: str) -> Dialect:
        if setting == "openai":
            return cls(setting, ignore_eos=False, continuous_usage_stats=False, token_ids=False,
                       decided="openai (dialect = \"openai\": no vLLM extensions, text prompts)")
        if setting == "vllm":
            return cls(setting, decided="vllm (dialect = \"vllm\": ignore_eos, continuous_usage_stats, token-id prompts)")
        return cls(setting, decided="vllm (dialect = \"auto\", not probed yet)")

    @property
    def learns(self) -> bool:
        return self.setting == "auto"

    @property
    def name(self) -> str:
        """``"vllm"`` (ignore_eos and token-id prompts), ``"openai"`` (neither) or ``"openai+..."`` (the one taken)."""
        took = [n for n, ok in ((IGNORE_EOS, self.ignore_eos), ("token_ids", self.token_ids)) if ok]
        return "vllm" if len(took) == 2 else "openai" + "".join(f"+{n}" for n in took)

    @property
    def lengths_forced(self) -> bool:
        return self.ignore_eos

    def extensions_sent(self, token_ids: bool) -> list[str]:
        sent = [IGNORE_EOS] if self.ignore_eos else []
        if self.stream_options:
            sent.append(STREAM_OPTIONS)
            if self.continuous_usage_stats:
                sent.append(CONTINUOUS)
        if token_ids and self.token_ids:
            sent.append(TOKEN_IDS)
        return sent

    def drop(self, names: set[str], why: str) -> None:
        """Stop sending ``names`` (from :func:`rejected`); the change becomes a note."""
        if IGNORE_EOS in names:
            self.ignore_eos = False
        if CONTINUOUS in names:
            self.continuous_usage_stats = False
        if STREAM_OPTIONS in names:
            self.stream_options = self.continuous_usage_stats = False
        if TOKEN_IDS in names:
            self.token_ids = False
        order = [*_FIELDS, TOKEN_IDS]
        shown = " and ".join(sorted(names, key=order.index))
        then = "prompts are sent as text (detokenized by the engine's tokenizer)" if names == {TOKEN_IDS} \
            else f"sent without {'them' if len(names) > 1 else 'it'} from now on"
        self.notes.append(f"dialect: the server rejected {shown} ({why}); {then}")

    def drop_all(self, why: str) -> None:
        self.ignore_eos = self.continuous_usage_stats = self.token_ids = False
        self.notes.append(f"dialect: the server rejected vLLM's extensions ({why}); plain OpenAI from now on")

    def lengths_note(self) -> str | None:
        if self.ignore_eos:
            return None
        return ("output lengths are not forced: the server does not take ignore_eos, so a request may stop at "
                "end-of-sequence before max_tokens; TPOT and throughput use the tokens that came")


def rejected(status: int, body: str, sent: list[str]) -> set[str]:
    """The extensions among ``sent`` that a 400/422 answer's body names (empty: none named)."""
    if status not in (400, 422):
        return set()
    text = body.lower()
    names = {f for f in _FIELDS if f in sent and f in text}
    if CONTINUOUS in names:
        names.discard(STREAM_OPTIONS)  # "stream_options.continuous_usage_stats": only the inner field
    if TOKEN_IDS in sent and "prompt" in text and ("string" in text or " str" in text):
        names.add(TOKEN_IDS)
    return names


def reason(status: int, body: str) -> str:
    """``HTTP 400: <the server's message>``: an error body's ``error.message`` or ``detail`` when it
    is JSON that has one, else the body as it came."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    msg: object = None
    if isinstance(obj, dict):
        err = obj.get("error")
        msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else obj.get("detail")
    return clean(f"HTTP {status}: {msg if isinstance(msg, str) and msg else body}", 300)
