"""Tiny, fully offline language models for tests.

:func:`tiny_tokenizer` trains a small byte-level BPE on a fixed text sample, so it needs
no download and round-trips any text exactly; :func:`tiny_causal_lm` builds a randomly
initialised two-layer Llama over it. Their outputs are meaningless but deterministic,
which is all the token-level machinery (padding, caching, sampling, logprobs) needs.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir
from searchgym.error import require

#: Special tokens of the tiny tokenizer; ``<|im_end|>`` is the end-of-sequence token.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>")

#: Protocol tags added as whole tokens (not special: they are decoded like text).
TAG_TOKENS = (
    "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
    "<information>", "</information>", "<query>", "</query>",
)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_SAMPLE = """\
Answer the given question. You must conduct reasoning inside <think> and </think> first every
time you get new information. After reasoning, if you find you lack some knowledge, you can call
a search engine by <search> query </search> and it will return the top searched results between
<information> and </information>. If you find no further external knowledge needed, you can
directly provide the answer inside <answer> and </answer>, without detailed illustrations.
For example, <answer> Beijing </answer>. Question: who founded Kelvaro Industries?
Doc 1(Title: Kelvaro Industries) Kelvaro Industries is a company founded in 1921 by Ilvar Odrenko.
The city of Marrowgate lies on the river Tesk. It was founded in the year 1402.
What is the capital of France? Paris is the capital and largest city of France.
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { } , . ; : ! ? ' "
"""


@functools.lru_cache(maxsize=None)
def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer of a few hundred tokens with a chat template (cached)."""
    tokenizers = require("tokenizers", extra="lm", feature="The tiny test tokenizer")
    transformers = require("transformers", extra="lm", feature="The tiny test tokenizer")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_SAMPLE] * 4, trainer)
    tok.add_tokens([tokenizers.AddedToken(tag, normalized=False, special=False) for tag in TAG_TOKENS])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<pad>",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_causal_lm(seed: int = 0, *, hidden_size: int = 64, num_attention_heads: int = 4, context: int = 256) -> Any:
    """A randomly initialised two-layer Llama (by default hidden 64, 4 heads, context 256)
    over :func:`tiny_tokenizer`, in eval mode.

    The same ``seed`` gives the same weights. The global torch random state is left as it was.
    """
    return tiny_causal_lm_for(tiny_tokenizer(), seed, hidden_size=hidden_size, num_attention_heads=num_attention_heads, context=context)


def tiny_causal_lm_for(tokenizer: Any, seed: int = 0, *, hidden_size: int = 64, num_attention_heads: int = 4, context: int = 256) -> Any:
    """A randomly initialised two-layer Llama over ``tokenizer``'s vocabulary (e.g. SmolLM2's,
    from :func:`searchgym.lm.models.smollm2_tokenizer`), in eval mode: the real tokenizer's
    token records at a tiny model's speed."""
    torch = require("torch", extra="lm", feature="The tiny test model")
    transformers = require("transformers", extra="lm", feature="The tiny test model")
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=max(1, num_attention_heads // 2),
        max_position_embeddings=context,
        # A wider initialisation than the default 0.02 gives peaked, varied next-token
        # distributions, so greedy decoding has clear winners instead of near ties.
        initializer_range=0.2,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    return model.eval()


def tiny_model_folder(seed: int = 0) -> Path:
    """A saved tiny random Llama with head size 64 (vLLM's CPU attention needs >= 32) and
    context 2048, with the tiny tokenizer: a folder any backend can load.

    Written once under ``$SEARCHGYM_CACHE/models/`` (to a temporary folder, then renamed).
    """
    target = cache_dir() / "models" / f"tiny-random-llama-hd64-seed{seed}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tiny-"))
    try:
        tiny_causal_lm(seed, hidden_size=128, num_attention_heads=2, context=2048).save_pretrained(tmp)
        tiny_tokenizer().save_pretrained(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process wrote it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
