"""vLLM-like Prometheus counters of the scripted server (``GET /metrics``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Counters:
    # requests: finished, running now, their prompt and generated tokens
    requests: int = 0
    running: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    # speculative decoding: accepted tokens per draft position, drafts, drafted and accepted tokens
    per_pos: list[int] = field(default_factory=list)
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    # prefix cache: prompt tokens looked up, and found
    prefix_queries: int = 0
    prefix_hits: int = 0

    def prometheus(self, model: str) -> bytes:
        lab = f'model_name="{model}",engine="0"'
        lines: list[str] = []

        def counter(name: str, value: float, extra: str = "", help_: str = "") -> None:
            if not any(ln.startswith(f"# TYPE {name}_total ") for ln in lines):
                lines.append(f"# HELP {name}_total {help_ or name}")
                lines.append(f"# TYPE {name}_total counter")
            labels = lab + ("," + extra if extra else "")
            lines.append(f"{name}_total{{{labels}}} {float(value)}")

        counter("vllm:prompt_tokens", self.prompt_tokens)
        counter("vllm:generation_tokens", self.generation_tokens)
        counter("vllm:request_success", self.requests, 'finished_reason="length"')
        counter("vllm:spec_decode_num_drafts", self.drafts)
        counter("vllm:spec_decode_num_draft_tokens", self.draft_tokens)
        counter("vllm:spec_decode_num_accepted_tokens", self.accepted)
        for i, v in enumerate(self.per_pos):
            counter("vllm:spec_decode_num_accepted_tokens_per_pos", v, f'position="{i}"')
        counter("vllm:prefix_cache_queries", self.prefix_queries)
        counter("vllm:prefix_cache_hits", self.prefix_hits)
        lines.append("# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.")
        lines.append("# TYPE vllm:kv_cache_usage_perc gauge")
        lines.append(f"vllm:kv_cache_usage_perc{{{lab}}} {min(1.0, 0.01 * self.running)}")
        lines.append("# HELP vllm:num_requests_running Number of requests running.")
        lines.append("# TYPE vllm:num_requests_running gauge")
        lines.append(f"vllm:num_requests_running{{{lab}}} {float(self.running)}")
        return ("\n".join(lines) + "\n").encode()


    def count_chunk(self, ntok: int, num_spec_tokens: int) -> None:
        """A streamed chunk of ``ntok`` tokens; with speculative decoding, a draft of ``num_spec_tokens``
        of which all but the chunk's last token were accepted."""
        self.generation_tokens += ntok
        k = num_spec_tokens
        if k > 0:
            acc = min(max(ntok - 1, 0), k)
            self.drafts += 1
            self.draft_tokens += k
            self.accepted += acc
            if len(self.per_pos) < k:
                self.per_pos.extend([0] * (k - len(self.per_pos)))
            for i in range(acc):
                self.per_pos[i] += 1

    def count_request(self, prompt_tokens: int, cached_tokens: int) -> None:
        """A finished streamed request and its prefix-cache lookups."""
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.prefix_queries += prompt_tokens
        self.prefix_hits += min(cached_tokens, prompt_tokens)
