"""The Generation contract, argument validation and the scripted backend."""

import re

import pytest
import torch

from searchgym.error import ConfigError
from searchgym.lm import Generation, ScriptedLM
from searchgym.lm.base import stop_end
from searchgym.lm.testing import tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def test_tiny_tokenizer_round_trips_text_and_tags(tokenizer):
    text = "<think> who? </think>\n<search> Kelvaro Industries founder </search> é 漢字"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    # Protocol tags are single tokens, so a stop string at a tag ends exactly on a token.
    assert tokenizer.encode("</search>", add_special_tokens=False) == [tokenizer.convert_tokens_to_ids("</search>")]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<pad>"


def test_apply_chat_uses_the_template_with_a_generation_prompt(tokenizer):
    lm = ScriptedLM(["x"], tokenizer)
    prompt = lm.apply_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_scripted_keeps_the_stop_string_and_cuts_after_it(tokenizer):
    lm = ScriptedLM(["<think> a </think>\n<search> b </search> trailing text"], tokenizer)
    [gen] = lm.generate(["prompt"], stop=["</search>"])
    assert gen.text == "<think> a </think>\n<search> b </search>"
    assert gen.finish_reason == "stop"
    assert tokenizer.decode(list(gen.token_ids)) == gen.text
    assert gen.logprobs == (0.0,) * len(gen.token_ids)


def test_scripted_earliest_stop_wins_and_length_cuts(tokenizer):
    lm = ScriptedLM(["<answer> x </answer> <search> y </search>"], tokenizer)
    [gen] = lm.generate([[1, 2]], stop=["</search>", "</answer>"])
    assert gen.text == "<answer> x </answer>"
    [gen] = lm.generate(["p"], max_new_tokens=3)
    assert len(gen.token_ids) == 3 and gen.finish_reason == "length"
    assert gen.text == tokenizer.decode(list(gen.token_ids))


def test_scripted_natural_end_emits_eos_and_cycles(tokenizer):
    lm = ScriptedLM(["one", "two"], tokenizer)
    gens = lm.generate(["a", "b", "c"])
    assert [g.text for g in gens] == ["one", "two", "one"]
    assert all(g.finish_reason == "stop" and g.token_ids[-1] == tokenizer.eos_token_id for g in gens)
    assert tokenizer.decode(list(gens[0].token_ids[:-1])) == "one"


def test_scripted_callable_sees_the_decoded_prompt(tokenizer):
    lm = ScriptedLM(lambda prompt: prompt.upper(), tokenizer)
    ids = tokenizer.encode("hello <search>", add_special_tokens=False)
    assert [g.text for g in lm.generate(["abc", ids])] == ["ABC", "HELLO <SEARCH>"]


def test_stop_end_picks_the_earliest_ending_stop():
    assert stop_end("a </b> c </d>", ["</d>", "</b>"]) == 6
    assert stop_end("nothing", ["</b>"]) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": 0}, "LanguageModel.generate expects max_new_tokens to be a positive integer, got 0."),
        ({"max_new_tokens": 2.5}, "LanguageModel.generate expects max_new_tokens to be a positive integer, got 2.5."),
        ({"temperature": -1.0}, "LanguageModel.generate expects temperature to be 0 (greedy) or a finite number >= 0.0001, got -1.0."),
        ({"temperature": 1e-300}, "LanguageModel.generate expects temperature to be 0 (greedy) or a finite number >= 0.0001, got 1e-300."),
        ({"top_p": 0}, "LanguageModel.generate expects top_p to be a number in (0, 1], got 0."),
        ({"top_k": -1}, "LanguageModel.generate expects top_k to be a non-negative integer (0 keeps every token), got -1."),
        ({"top_k": 2.5}, "LanguageModel.generate expects top_k to be a non-negative integer (0 keeps every token), got 2.5."),
        ({"stop": "</search>"}, "LanguageModel.generate expects stop to be a sequence of strings, got the string '</search>'. Wrap it in a list: ['</search>']."),
        ({"stop": ["", "x"]}, "LanguageModel.generate expects stop to be a sequence of non-empty strings, got ['', 'x']."),
        ({"seed": "1"}, "LanguageModel.generate expects seed to be an integer, a sequence of integers (one per prompt) or None, got '1'."),
        ({"seed": [1, True]}, "LanguageModel.generate expects seed to be an integer, a sequence of integers (one per prompt) or None, got [1, True]."),
        ({"seed": [1, 2]}, "LanguageModel.generate expects seed to be one integer per prompt, got 2 seeds for 1 prompts."),
        ({"seed": -1}, "LanguageModel.generate expects seed to be in [0, 2**63) (one seed per prompt: seed + i for an integer seed), got -1."),
        ({"seed": [2**64]}, "LanguageModel.generate expects seed to be in [0, 2**63) (one seed per prompt: seed + i for an integer seed), got 18446744073709551616."),
    ],
)
def test_bad_arguments_raise_config_error(tokenizer, kwargs, message):
    lm = ScriptedLM(["x"], tokenizer)
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        lm.generate(["p"], **kwargs)


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ("p", "LanguageModel.generate expects a sequence of prompts (strings or token-id lists), got str. Wrap a single prompt in a list."),
        ([[1, -2]], "LanguageModel.generate expects each prompt to be a string or a sequence of non-negative token ids, got [1, -2] at index 0."),
        (["ok", ""], "LanguageModel.generate expects non-empty prompts, got an empty prompt at index 1."),
        ([torch.tensor(5)], "LanguageModel.generate expects each prompt to be a string or a sequence of non-negative token ids, got tensor(5) at index 0."),
    ],
)
def test_bad_prompts_raise_config_error(tokenizer, prompts, message):
    lm = ScriptedLM(["x"], tokenizer)
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        lm.generate(prompts)


def test_generation_checks_its_fields():
    with pytest.raises(ConfigError, match=r"^Generation expects as many logprobs as token_ids, got 0 logprobs for 1 token ids\.$"):
        Generation("a", (1,), (), "stop")
    with pytest.raises(ConfigError, match=r"^Generation expects finish_reason to be one of stop, length, prompt_too_long, error, got 'eos'\.$"):
        Generation("", (), (), "eos")


def test_an_integer_seed_is_one_seed_per_prompt_in_order():
    from searchgym.lm.base import check_sampling_params

    params = check_sampling_params(max_new_tokens=1, temperature=1.0, top_p=1.0, stop=(), seed=7, num_prompts=3)
    assert params.seed == (7, 8, 9)
    assert check_sampling_params(max_new_tokens=1, temperature=1.0, top_p=1.0, stop=(), seed=None, num_prompts=3).seed is None
    assert check_sampling_params(max_new_tokens=1, temperature=1.0, top_p=1.0, stop=(), seed=(5, 1), num_prompts=2).seed == (5, 1)


def test_derive_seed_is_stable_and_separates_its_parts():
    from searchgym.lm.base import derive_seed

    assert derive_seed(0, "q1", 3, 0) == derive_seed(0, "q1", 3, 0)
    seeds = {derive_seed(0, "q1", 3, 0), derive_seed(0, "q1", 3, 1), derive_seed(0, "q1", 4, 0), derive_seed(0, "q2", 3, 0), derive_seed(1, "q1", 3, 0)}
    assert len(seeds) == 5 and all(0 <= s < 2**63 for s in seeds)
    # A value written into the code: the seed must not change between processes or versions.
    assert derive_seed(0, None, "q1", 3, 0) == 2790968572096737462


def test_load_lm_refuses_options_its_backend_does_not_take_and_devices_it_lacks():
    from searchgym.lm.registry import load_lm

    with pytest.raises(ConfigError, match=r"^The transformers backend does not take the option 'devcie' \(did you mean 'device'\?\); it takes: tokenizer, device, dtype,"):
        load_lm("tiny-random", devcie="cpu")
    with pytest.raises(ConfigError, match=r"^TransformersLM expects device to be a torch device such as 'cpu', 'cuda' or 'cuda:1', got 'gpu'"):
        load_lm("tiny-random", device="gpu", cache=False)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"^TransformersLM got device='cuda', but this torch has no CUDA device; use device='cpu'\.$"):
            load_lm("tiny-random", device="cuda", cache=False)


def test_load_lm_loads_again_a_cached_model_that_was_closed(monkeypatch):
    from searchgym.lm import registry
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    class Closable(ScriptedLM):
        def __init__(self, model, **options):
            super().__init__(["x"], tiny_tokenizer())

        def close(self):
            self.closed = True

    monkeypatch.setattr(registry, "backend_class", lambda backend: Closable)
    first = registry.load_lm("closable-test-model")
    assert registry.load_lm("closable-test-model") is first
    first.close()
    second = registry.load_lm("closable-test-model")
    assert second is not first and not second.closed and registry.load_lm("closable-test-model") is second
    for key in [key for key in registry._CACHE if key[0] == "closable-test-model"]:  # the other tests' models stay loaded
        del registry._CACHE[key]
