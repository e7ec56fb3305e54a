"""How an LM agent turns the env's text into token ids.

One source for :class:`~searchgym.agents.lm_agents.LMAgent` and for the engine adapters
(``searchgym.integrations``), so that an episode played by any of them puts the same ids
in front of the model: the prompt is the env's chat messages through the tokenizer's chat
template (or the raw prompt text for protocols that feed raw text), and every observation
is its text encoded without special tokens, appended without a new chat turn.

Played through tool calls (``action_format="tools"``), the conversation is the env's
``info["messages"]`` rendered by the chat template with ``tools=info["tools"]``: the prompt
is its render with the assistant's header; a step's observation is the render of the
step's new messages and the next header (:func:`observation_text`); the sampled ids stay
as they were sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.error import ConfigError
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


# ---------------------------------------------------------------------------- tool play under a chat template
def render_chat(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any, *, template: str | None = None,
    generation_prompt: bool, **template_options: Any,
) -> str:
    """``messages`` (and the ``tools`` schemas) as the chat template writes them: the
    tokenizer's own template, or the Jinja text ``template``; with ``generation_prompt``,
    followed by the header of the assistant's next turn."""
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages], tools=tools, chat_template=template, add_generation_prompt=generation_prompt,
        tokenize=False, **template_options,
    )


def turn_text(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any, message: Mapping[str, Any], *, end_of_turn: str | None,
    template: str | None = None, **template_options: Any,
) -> str:
    """What the model writes when its turn is ``message``, as the template shows it: the
    rendering of ``messages + [message]`` past the generation prompt of ``messages``, up to
    and including ``end_of_turn`` (an oracle's turn written as a model would sample it)."""
    prompt = render_chat(tokenizer, messages, tools, template=template, generation_prompt=True, **template_options)
    full = render_chat(tokenizer, [*messages, message], tools, template=template, generation_prompt=False, **template_options)
    if not full.startswith(prompt):
        raise ConfigError(
            "turn_text expects the chat template to render a conversation with one more assistant message as the "
            "generation prompt followed by that message; this template renders the earlier turns differently then."
        )
    text = full[len(prompt):]
    if end_of_turn and end_of_turn in text:
        text = text[: text.rindex(end_of_turn) + len(end_of_turn)]
    return text


def observation_text(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any, *, since: int, end_of_turn: str | None,
    closed: bool, template: str | None = None, **template_options: Any,
) -> tuple[str, bool]:
    """The text a tool step adds to an agent's record, and whether the template rewrote history.

    ``messages[since - 1]`` is the assistant turn the agent sampled and ``messages[since:]``
    the messages the env answered it with (tool results, or a user message after a bad
    turn). The text is the template's rendering of those messages and the header of the
    next assistant turn, found as the difference between the render of the conversation
    before them and after them; it starts with what the template writes after the
    assistant's ``end_of_turn`` (ChatML's newline), and with ``end_of_turn`` itself when the
    sampled turn did not end with it (``closed`` False: cut at ``max_new_tokens``).

    When the earlier render is not a prefix of the later one the template rewrote history
    (Qwen3's drops past ``<think>`` blocks): the messages are then rendered after a stand-in
    of the assistant turn without its text (its calls only), and the second value is True.
    """
    before = render_chat(tokenizer, messages[:since], tools, template=template, generation_prompt=False, **template_options)
    after = render_chat(tokenizer, messages, tools, template=template, generation_prompt=True, **template_options)
    rewritten = not after.startswith(before)
    if rewritten:
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
        stand_in = {k: v for k, v in messages[since - 1].items() if k != "content"} | {"content": ""}
        base = [*messages[: first_user + 1], stand_in]
        before = render_chat(tokenizer, base, tools, template=template, generation_prompt=False, **template_options)
        after = render_chat(tokenizer, [*base, *messages[since:]], tools, template=template, generation_prompt=True, **template_options)
        if not after.startswith(before):
            raise ConfigError(
                "The chat template renders the env's reply messages differently depending on the conversation before "
                "them, even after a stand-in turn; the agent cannot find the ids of the reply. Use a template that "
                "renders each message on its own (e.g. chat_template=\"hermes\")."
            )
    tail, close = "", ""
    if end_of_turn and end_of_turn in before:
        tail = before[before.rindex(end_of_turn) + len(end_of_turn):]
        close = "" if closed else end_of_turn
    return close + tail + after[len(before):], rewritten
