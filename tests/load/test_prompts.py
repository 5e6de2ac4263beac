"""Exact-length prompts with a real (tiny, trained here) BPE tokenizer."""

from __future__ import annotations

from typing import Any

import pytest
from tiny_bpe import CORPUS, tiny_bpe

from pytest_perfgate.load import prompts


@pytest.fixture(scope="module", params=[True, False], ids=["bos", "nobos"])
def tok(request: pytest.FixtureRequest) -> Any:
    return tiny_bpe(request.param)


@pytest.mark.parametrize("n", [1, 7, 64, 500])
def test_token_id_prompts_have_exact_length(tok: Any, n: int) -> None:
    reqs = prompts.exact_length_prompts(tok, n, 20, seed=1, corpus=CORPUS, tag="t", max_tokens=9)
    assert len(reqs) == 20
    for r in reqs:
        assert isinstance(r.prompt, tuple) and len(r.prompt) == n == r.prompt_tokens
        assert r.max_tokens == 9 and r.tag == "t"
    bos = prompts.bos_id(tok)
    if bos is not None:
        assert all(r.prompt[0] == bos for r in reqs)


def test_prompts_are_unique_from_the_first_block(tok: Any) -> None:
    reqs = prompts.exact_length_prompts(tok, 64, 50, seed=3, corpus=CORPUS)
    heads = {r.prompt[:16] for r in reqs}
    assert len(heads) == 50


def test_seeded_and_reproducible(tok: Any) -> None:
    a = prompts.exact_length_prompts(tok, 32, 5, seed=7, corpus=CORPUS)
    b = prompts.exact_length_prompts(tok, 32, 5, seed=7, corpus=CORPUS)
    c = prompts.exact_length_prompts(tok, 32, 5, seed=8, corpus=CORPUS)
    assert [r.prompt for r in a] == [r.prompt for r in b] != [r.prompt for r in c]


@pytest.mark.parametrize("n", [5, 33, 200])
def test_text_prompts_reencode_to_exact_length(tok: Any, n: int) -> None:
    reqs = prompts.exact_length_prompts(tok, n, 10, seed=2, corpus=CORPUS, as_text=True)
    for r in reqs:
        assert isinstance(r.prompt, str)
        assert len(tok.encode(r.prompt, add_special_tokens=True)) == n


def test_shared_prefix(tok: Any) -> None:
    reqs = prompts.shared_prefix_prompts(tok, 48, 16, 10, seed=0, corpus=CORPUS)
    assert all(len(r.prompt) == 64 == r.prompt_tokens for r in reqs)
    assert len({r.prompt[:48] for r in reqs}) == 1
    assert len({r.prompt[48:] for r in reqs}) == 10
    assert reqs[0].tag == "shared-prefix"


def test_dialogue_and_math_sets(tok: Any) -> None:
    for fn, tag in ((prompts.dialogue_prompts, "dialogue"), (prompts.math_prompts, "math")):
        reqs = fn(tok, 40, 4, seed=0)
        assert all(len(r.prompt) == 40 and r.tag == tag for r in reqs)
    assert prompts.load_corpus("no-such-corpus") == prompts.FALLBACK_CORPUS


def test_bad_arguments(tok: Any) -> None:
    with pytest.raises(ValueError):
        prompts.exact_length_prompts(tok, 0, 3)


def test_warmup_prompts_have_the_measured_shape(tok: Any) -> None:
    """Warm-ups of 500-token measured prompts are 500 tokens (the prefill path of that length is the
    one warmed, docs/statistics.md#warm-up), with their own content and the measured output length."""
    measured = prompts.exact_length_prompts(tok, 500, 2, seed=1, corpus=CORPUS, tag="m", max_tokens=9)
    warm = prompts.warmup_prompts(measured, 3, tok)
    assert [w.prompt_tokens for w in warm] == [500, 500, 500] and all(w.max_tokens == 9 for w in warm)
    assert not {str(w.prompt) for w in warm} & {str(m.prompt) for m in measured}
