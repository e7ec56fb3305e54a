"""TransformersLM on the tiny random model: padding, stopping, seeded sampling and logprobs."""

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm import TransformersLM  # noqa: E402
from searchgym.lm.hf import SeededSampler  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402

# Prompts of different lengths, so batching needs left padding.
PROMPTS = [
    "Question: who founded Kelvaro Industries?",
    "The city of",
    "<think> I should look it up. </think>\n<search>",
    "Paris is the capital and largest city of France. What is the capital of France?",
]


# Tests that compare logprobs of separate calls exactly fix the thread count: a tuned
# count (threads="auto") may differ between calls, and with it the last bits of a logprob.
@pytest.fixture(scope="module")
def lm():
    return TransformersLM(tiny_causal_lm(seed=0), tiny_tokenizer(), device="cpu", threads=1)


def test_batched_greedy_equals_one_by_one(lm):
    batched = lm.generate(PROMPTS, max_new_tokens=12, temperature=0)
    single = [lm.generate([p], max_new_tokens=12, temperature=0)[0] for p in PROMPTS]
    assert [g.token_ids for g in batched] == [g.token_ids for g in single]
    for b, s in zip(batched, single):
        assert b.text == s.text and b.finish_reason == s.finish_reason == "length"
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(s.logprobs), atol=1e-4)


def test_generation_contract(lm):
    gens = lm.generate(PROMPTS, max_new_tokens=7, temperature=0)
    for g in gens:
        assert len(g.token_ids) == len(g.logprobs) == 7
        assert g.finish_reason == "length"
        assert lm.tokenizer.decode(list(g.token_ids)) == g.text
        assert all(lp <= 0 for lp in g.logprobs)


def test_stop_string_is_kept_and_ends_the_sequence(lm):
    [free] = lm.generate([PROMPTS[0]], max_new_tokens=30, temperature=0)
    # Use a piece of the greedy continuation as the stop string; greedy is deterministic.
    stop = lm.tokenizer.decode(list(free.token_ids[4:6]))
    end = free.text.find(stop) + len(stop)
    gens = lm.generate([PROMPTS[0], PROMPTS[1]], max_new_tokens=30, temperature=0, stop=[stop])
    assert gens[0].finish_reason == "stop"
    assert gens[0].text == free.text[:end] and gens[0].text.endswith(stop)
    assert gens[0].token_ids == free.token_ids[: len(gens[0].token_ids)]
    assert lm.tokenizer.decode(list(gens[0].token_ids)).startswith(gens[0].text)
    assert len(gens[0].token_ids) <= 6
    # The other sequence of the batch is not affected by the first one stopping.
    [other] = lm.generate([PROMPTS[1]], max_new_tokens=30, temperature=0, stop=[stop])
    assert (gens[1].text, gens[1].token_ids, gens[1].finish_reason) == (other.text, other.token_ids, other.finish_reason)


def test_eos_ends_with_stop_and_is_not_in_the_text():
    tokenizer = tiny_tokenizer()
    model = tiny_causal_lm(seed=0)
    plain = TransformersLM(model, tokenizer, device="cpu", threads=1)
    [free] = plain.generate(["The city of"], max_new_tokens=8, temperature=0)
    # The backend also ends on the model's generation_config EOS ids (chat models declare
    # their end-of-turn token there); declare the third greedy token one.
    eos = free.token_ids[2]
    model.generation_config.eos_token_id = [eos]
    lm = TransformersLM(model, tokenizer, device="cpu", threads=1)
    [g] = lm.generate(["The city of"], max_new_tokens=8, temperature=0)
    assert g.finish_reason == "stop"
    assert g.token_ids == free.token_ids[: free.token_ids.index(eos) + 1]
    assert g.text == tokenizer.decode(list(g.token_ids[:-1]))
    assert g.logprobs == free.logprobs[: len(g.token_ids)]


def test_same_seed_same_samples_different_seed_different(lm):
    a = lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=3)
    b = lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=3)
    c = lm.generate(PROMPTS, max_new_tokens=16, temperature=1.0, seed=4)
    assert a == b
    assert [g.token_ids for g in a] != [g.token_ids for g in c]


def test_a_seeded_prompt_samples_the_same_alone_or_in_any_batch(lm):
    # Each prompt draws from its own seed's stream: alone, in a batch, in another order,
    # the same tokens; logprobs differ only by the rounding of batched products.
    def same(a, b):
        return [(g.token_ids, g.text, g.finish_reason) for g in a] == [(g.token_ids, g.text, g.finish_reason) for g in b] and all(
            torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4) for x, y in zip(a, b)
        )

    seeds = [11, 22, 33]
    together = lm.generate(PROMPTS[:3], max_new_tokens=12, temperature=1.0, seed=seeds)
    alone = [lm.generate([p], max_new_tokens=12, temperature=1.0, seed=[s])[0] for p, s in zip(PROMPTS[:3], seeds)]
    reordered = lm.generate(PROMPTS[:3][::-1], max_new_tokens=12, temperature=1.0, seed=seeds[::-1])[::-1]
    assert same(together, alone) and same(reordered, alone)
    # An integer seed s seeds the prompts with s, s + 1, ...
    by_int = lm.generate(PROMPTS[:3], max_new_tokens=12, temperature=1.0, seed=11)
    assert same(by_int, [lm.generate([p], max_new_tokens=12, temperature=1.0, seed=11 + i)[0] for i, p in enumerate(PROMPTS[:3])])
    # The same prompt twice with two seeds draws twice.
    twice = lm.generate([PROMPTS[0]] * 2, max_new_tokens=12, temperature=1.0, seed=[1, 2])
    assert twice[0].token_ids != twice[1].token_ids


def _draw(logits, generators, temperature=1.0, top_p=1.0, top_k=0):
    """One step of SeededSampler and generate's greedy choice: the ids and their logprobs."""
    sampler = SeededSampler(temperature, top_p, generators, top_k=top_k)
    ids = sampler(torch.zeros((len(logits), 1), dtype=torch.long), logits).argmax(dim=-1)  # [B]
    return ids, sampler.logprobs(ids.unsqueeze(-1)).squeeze(-1)


def test_sampling_draws_each_token_with_its_probability():
    # 40,000 draws from a known distribution: frequencies within 4 standard deviations of
    # the probabilities; a token outside the top-p nucleus or of probability 0 never comes.
    probs = torch.tensor([0.5, 0.25, 0.15, 0.1, 0.0])
    logits = torch.log(probs).expand(40_000, -1).contiguous()
    counts = torch.bincount(_draw(logits, [torch.Generator().manual_seed(0)] * 40_000)[0], minlength=5).double()
    assert torch.all((counts / 40_000 - probs.double()).abs() <= 4 * (probs.double() * (1 - probs.double()) / 40_000).sqrt())
    assert counts[4] == 0
    # Per-row generators draw the same as one row at a time.
    together = _draw(logits[:8], [torch.Generator().manual_seed(i) for i in range(8)])[0]
    alone = torch.cat([_draw(logits[:1], [torch.Generator().manual_seed(i)])[0] for i in range(8)])
    assert torch.equal(together, alone)
    ids, logprobs = _draw(logits[:4000], [torch.Generator().manual_seed(1)] * 4000, top_p=0.7)
    assert set(ids.tolist()) == {0, 1} and torch.allclose(logprobs.exp(), torch.tensor([2 / 3, 1 / 3])[ids])
    # top_k keeps the k most likely tokens, renormalized; top-p then applies to those.
    ids, logprobs = _draw(logits[:4000], [torch.Generator().manual_seed(2)] * 4000, top_k=3)
    assert set(ids.tolist()) == {0, 1, 2} and torch.allclose(logprobs.exp(), (probs[:3] / 0.9)[ids])
    ids, _ = _draw(logits[:4000], [torch.Generator().manual_seed(3)] * 4000, top_k=3, top_p=0.8)
    assert set(ids.tolist()) == {0, 1}  # 0.5/0.9 < 0.8 <= (0.5+0.25)/0.9


def _recomputed_logprobs(lm, prompt_ids, generated, temperature=1.0):
    ids = torch.tensor([list(prompt_ids) + list(generated)])
    with torch.no_grad():
        logits = lm.model(ids).logits[0].float() / temperature  # [T, V]
    logp = torch.log_softmax(logits, dim=-1)
    positions = torch.arange(len(prompt_ids) - 1, ids.shape[1] - 1)
    return logp[positions, torch.tensor(generated)]


def test_greedy_logprobs_match_a_full_forward_pass(lm):
    gens = lm.generate(PROMPTS, max_new_tokens=10, temperature=0)
    for prompt, g in zip(PROMPTS, gens):
        prompt_ids = lm.tokenizer.encode(prompt, add_special_tokens=False)
        expected = _recomputed_logprobs(lm, prompt_ids, g.token_ids)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


def test_sampled_logprobs_are_under_the_tempered_distribution(lm):
    gens = lm.generate(PROMPTS[:2], max_new_tokens=8, temperature=0.7, seed=0)
    for prompt, g in zip(PROMPTS, gens):
        prompt_ids = lm.tokenizer.encode(prompt, add_special_tokens=False)
        expected = _recomputed_logprobs(lm, prompt_ids, g.token_ids, temperature=0.7)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


def test_top_p_restricts_to_the_nucleus(lm):
    # With a tiny nucleus only the most likely token survives, so sampling equals greedy
    # and each logprob is 0 (the renormalized nucleus has one token).
    sampled = lm.generate(PROMPTS, max_new_tokens=6, temperature=1.0, top_p=1e-6, seed=1)
    greedy = lm.generate(PROMPTS, max_new_tokens=6, temperature=0)
    assert [g.token_ids for g in sampled] == [g.token_ids for g in greedy]
    assert all(lp == 0.0 for g in sampled for lp in g.logprobs)


def test_token_id_prompts_equal_text_prompts(lm):
    ids = [lm.tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]
    assert lm.generate(ids, max_new_tokens=8, temperature=0) == lm.generate(PROMPTS, max_new_tokens=8, temperature=0)
    mixed = lm.generate([ids[0], PROMPTS[1]], max_new_tokens=8, temperature=0.9, seed=5)
    assert mixed == lm.generate([PROMPTS[0], ids[1]], max_new_tokens=8, temperature=0.9, seed=5)


def test_prompt_too_long_is_flagged_and_context_caps_length(lm):
    context = lm.model.config.max_position_embeddings
    too_long = [7] * context
    near_full = [7] * (context - 3)
    gens = lm.generate([too_long, PROMPTS[1], near_full], max_new_tokens=10, temperature=0)
    assert gens[0] == type(gens[0])("", (), (), "prompt_too_long")
    assert len(gens[1].token_ids) == 10
    assert len(gens[2].token_ids) == 3 and gens[2].finish_reason == "length"


def test_rows_that_finish_early_do_not_change_the_others(lm):
    """The widest prompt runs out of context after 4 tokens; every row still equals its
    own one-prompt generation."""
    context = lm.model.config.max_position_embeddings
    prompts = [[7] * (context - 4), PROMPTS[1], PROMPTS[0], PROMPTS[3]]
    batched = lm.generate(prompts, max_new_tokens=9, temperature=0)
    single = [lm.generate([p], max_new_tokens=9, temperature=0)[0] for p in prompts]
    assert [len(g.token_ids) for g in batched] == [4, 9, 9, 9]
    for b, s in zip(batched, single):
        assert (b.text, b.token_ids, b.finish_reason) == (s.text, s.token_ids, s.finish_reason)
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(s.logprobs), atol=1e-4)


def test_a_model_in_training_keeps_its_modules_and_its_mode():
    model = tiny_causal_lm(seed=0).train()
    modules = [(name, type(module)) for name, module in model.named_modules()]
    lm = TransformersLM(model, tiny_tokenizer())
    assert lm.model is model and model.training
    modes = []
    forward = model.forward

    def recording(*args, **kwargs):
        modes.append(model.training)
        return forward(*args, **kwargs)

    model.forward = recording
    lm.generate(PROMPTS[:2], max_new_tokens=3, temperature=1.0, seed=0)
    del model.forward
    assert modes and not any(modes)  # generated in eval mode: no dropout
    assert model.training  # the caller's mode is back
    assert [(name, type(module)) for name, module in model.named_modules()] == modules
    model.eval()
    lm.generate(PROMPTS[:1], max_new_tokens=2, temperature=0)
    assert not model.training


def test_the_model_generation_config_does_not_change_the_distribution(lm):
    # Sampling settings a checkpoint ships (top_k, a repetition penalty...) do not apply:
    # the backend samples from exactly what generate's arguments say.
    reference = lm.generate(PROMPTS, max_new_tokens=8, temperature=0.8, seed=2)
    config = lm.model.generation_config
    saved = (config.top_k, config.repetition_penalty, config.do_sample)
    config.top_k, config.repetition_penalty, config.do_sample = 2, 3.0, True
    try:
        assert lm.generate(PROMPTS, max_new_tokens=8, temperature=0.8, seed=2) == reference
    finally:
        config.top_k, config.repetition_penalty, config.do_sample = saved


def test_out_of_vocabulary_ids_raise(lm):
    vocab = lm.model.get_input_embeddings().num_embeddings
    message = f"TransformersLM.generate expects token ids below the vocabulary size {vocab}, got id {vocab} in prompt 0."
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        lm.generate([[1, vocab]], max_new_tokens=2)


def test_unknown_model_name_lists_what_is_accepted(tmp_path):
    with pytest.raises(ConfigError, match=r"^TransformersLM expects a local model folder containing config\.json, a Hugging Face model id already in the local cache \(nothing is downloaded\), or one of: smollm2, tiny-random, tiny-random-2k; got 'no-such/model-xyz', which could not be loaded offline \(.*\)\.$"):
        TransformersLM("no-such/model-xyz")
    with pytest.raises(ConfigError, match=r"^TransformersLM expects .*; got the path '.*', which has no config\.json\.$"):
        TransformersLM(str(tmp_path))
    with pytest.raises(ConfigError, match=r"^TransformersLM expects dtype to be one of float32, float16, bfloat16, a torch\.dtype or None, got 'fp8'\.$"):
        TransformersLM("tiny-random", dtype="fp8")


def test_local_folder_round_trip(tmp_path, lm):
    lm.model.save_pretrained(tmp_path)
    lm.tokenizer.save_pretrained(tmp_path)
    loaded = TransformersLM(str(tmp_path), device="cpu", threads=1)
    assert loaded.generate(PROMPTS, max_new_tokens=6, temperature=0) == lm.generate(PROMPTS, max_new_tokens=6, temperature=0)
