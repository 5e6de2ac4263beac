"""A real byte-level BPE tokenizer, tiny and trained here in a second (vocabulary 300, on the
prompts' fallback corpus): shared by the prompt and trace tests (test_prompts.py, test_traces.py)."""

from __future__ import annotations

from typing import Any

from pytest_perfgate.load import prompts

CORPUS = prompts.FALLBACK_CORPUS * 3


def tiny_bpe(bos: bool) -> Any:
    """A ``PreTrainedTokenizerFast`` trained on :data:`CORPUS`; with ``bos`` it prepends ``<s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS], trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
