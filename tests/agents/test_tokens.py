"""The shared prompt / observation tokenization of LM agents and engine adapters."""

import pytest

from searchgym.agents.tokens import chat_ids, encode_text, prompt_ids
from searchgym.error import ConfigError
from searchgym.lm.testing import tiny_tokenizer


def test_prompt_ids_use_the_chat_template_only_when_asked_and_given_messages():
    tok = tiny_tokenizer()
    messages = [{"role": "user", "content": "who founded Kelvaro Industries?"}]
    info = {"prompt_messages": messages}
    templated = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt_ids(tok, "raw text", info, chat=True) == tuple(tok.encode(templated, add_special_tokens=False))
    assert prompt_ids(tok, "raw text", info, chat=True) == chat_ids(tok, messages)
    assert prompt_ids(tok, "raw text", info, chat=False) == tuple(tok.encode("raw text", add_special_tokens=False))
    assert prompt_ids(tok, "raw text", {}, chat=True) == encode_text(tok, "raw text")


def test_encode_text_adds_no_special_tokens_and_round_trips():
    tok = tiny_tokenizer()
    ids = encode_text(tok, "<information>Doc 1</information>")
    assert tok.decode(ids) == "<information>Doc 1</information>"
    assert encode_text(tok, "") == ()


def test_a_tokenizer_without_a_chat_template_is_a_config_error():
    tok = tiny_tokenizer()
    plain = tok.__class__(tokenizer_object=tok.backend_tokenizer, eos_token="<|im_end|>")
    with pytest.raises(ConfigError, match=rf"^chat_prompt expects a tokenizer with a chat template, got {type(plain).__name__} without one\. Set tokenizer\.chat_template or format the prompt yourself\.$"):
        prompt_ids(plain, "raw", {"prompt_messages": [{"role": "user", "content": "q"}]}, chat=True)
