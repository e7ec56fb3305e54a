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

import os
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

    When the earlier render is not a prefix of the later one, or the template refuses to
    render the conversation (Llama 3.1's allows one call per turn), the template rewrote
    history: Qwen3's drops past ``<think>`` blocks, and renders the last assistant turn
    otherwise than one followed by a user message. The new messages are then rendered
    after the conversation's opening (system and first user message) alone, which holds
    no assistant turn to rewrite, and the second value is True. A template that renders
    even those differently by what precedes them gets the part of that render past the
    opening both share (the record is the agent's own; the caller marks it). Never raises
    for a template that renders the opening and the new messages.
    """

    def render(part: Sequence[Mapping[str, Any]], generation_prompt: bool) -> str:
        return render_chat(tokenizer, part, tools, template=template, generation_prompt=generation_prompt, **template_options)

    new = list(messages[since:])
    try:
        before: str | None = render(messages[:since], False)
        after = render(messages, True)
    except Exception:  # noqa: BLE001  a template may refuse a turn it cannot write (Llama 3.1: one call per turn)
        before, after = None, ""
    rewritten = before is None or not after.startswith(before)
    if not rewritten:
        reply = after[len(before):]  # type: ignore[arg-type]
    else:
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
        opening = list(messages[: first_user + 1])
        base, whole = render(opening, False), render([*opening, *new], True)
        shared = base if whole.startswith(base) else os.path.commonprefix([base, whole])
        reply = whole[len(shared):]
    tail = _after_turn(render, messages[:since] if before is None else None, before, end_of_turn)
    close = "" if closed or tail is None else end_of_turn or ""
    return close + (tail or "") + reply, rewritten


def _after_turn(render: Any, turn: Sequence[Mapping[str, Any]] | None, rendered: str | None, end_of_turn: str | None) -> str | None:
    """What the template writes after an assistant turn's ``end_of_turn`` (ChatML: a
    newline), read from ``rendered`` (a conversation ending with that turn) or, when the
    template would not render it, from a one-line stand-in turn; None when the template
    writes no ``end_of_turn`` there."""
    if not end_of_turn:
        return None
    if rendered is None and turn is not None:
        first_user = next((i for i, m in enumerate(turn) if m.get("role") == "user"), 0)
        try:
            rendered = render([*turn[: first_user + 1], {"role": "assistant", "content": "x"}], False)
        except Exception:  # noqa: BLE001  nothing to learn from: no tail
            rendered = None
    if not rendered or end_of_turn not in rendered:
        return None
    return rendered[rendered.rindex(end_of_turn) + len(end_of_turn):]
