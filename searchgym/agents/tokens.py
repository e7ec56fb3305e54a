"""How an LM agent turns the env's text into token ids.

One source for :class:`~searchgym.agents.lm_agents.LMAgent` and for the engine adapters
(``searchgym.integrations``), so that an episode played by any of them puts the same ids
in front of the model: the prompt is the env's chat messages through the tokenizer's chat
template (or the raw prompt text for protocols that feed raw text), and every observation
is its text encoded without special tokens, appended without a new chat turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.lm.base import chat_prompt


def encode_text(tokenizer: Any, text: str) -> tuple[int, ...]:
    """``text`` as token ids, without special tokens (empty text: no ids)."""
    return tuple(tokenizer.encode(text, add_special_tokens=False)) if text else ()


def prompt_ids(
    tokenizer: Any, prompt: str, info: Mapping[str, Any], *, chat: bool, **template_options: Any
) -> tuple[int, ...]:
    """The ids of an episode's prompt, from ``env.reset()``'s ``(prompt, info)``.

    With ``chat``, ``info["prompt_messages"]`` through the chat template (``template_options``
    go to it); otherwise, or when the env gives no messages, the prompt text itself.
    """
    if chat and "prompt_messages" in info:
        return encode_text(tokenizer, chat_prompt(tokenizer, info["prompt_messages"], **template_options))
    return encode_text(tokenizer, prompt)


def chat_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]], **template_options: Any) -> tuple[int, ...]:
    """Chat ``messages`` as the ids of a prompt for the assistant's turn."""
    return encode_text(tokenizer, chat_prompt(tokenizer, messages, **template_options))
