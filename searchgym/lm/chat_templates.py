"""Chat templates with tools, written here from the public formats.

A model plays a game through tool calls (``action_format="tools"``) by reading the
conversation rendered by its chat template with the game's function schemas
(``apply_chat_template(messages, tools=...)``), and writing calls in the form its template
shows. Many small models' packaged templates write no tools (SmolLM2's among them): give
them one of these.

- ``"hermes"``: ChatML turns (``<|im_start|>role ... <|im_end|>``, the tokens of SmolLM2,
  Qwen and most ChatML models). The tools are listed as JSON schemas inside
  ``<tools></tools>`` in the system turn; the assistant writes each call as
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` after its text;
  consecutive tool results come back in one user turn, each inside
  ``<tool_response></tool_response>``. The env reads it with ``tool_parser="hermes"``.
- ``"hermes-think"``: the same, but the ``<think>...</think>`` block of every assistant
  turn that is followed by another message is dropped, as Qwen3's template drops the
  reasoning of past turns (and DeepSeek-R1's of every past turn): the template rewrites
  history, so re-rendering a conversation no longer gives the tokens that were sampled.
- ``"llama3"``: Llama 3.1's JSON tool calls: ``<|start_header_id|>role<|end_header_id|>``
  headers and ``<|eot_id|>``; the tools are listed in the system turn; a turn that calls
  is nothing but ``{"name": ..., "parameters": {...}}`` (several joined by ``"; "``); a
  tool result is an ``ipython`` turn. The env reads it with ``tool_parser="llama3_json"``.
  Its header tokens are not in every vocabulary: :func:`install_chat_template` adds them.
  Its assistant header ends in ``\n\n``: in a vocabulary whose pre-tokenizer splits
  ``"\n\n{"`` otherwise than a lone ``"\n\n"`` (SmolLM2's), the record keeps the text of a
  fresh render but not all its ids (``Trajectory.render_mismatch == "tokens"``).
- ``"mistral"``: Mistral's control tokens: the tools inside ``[AVAILABLE_TOOLS]``, user
  turns inside ``[INST]...[/INST]``, calls as ``[TOOL_CALLS]`` and a JSON list of
  ``{"name", "arguments"}``, the turn ended by ``</s>``, each result inside
  ``[TOOL_RESULTS]...[/TOOL_RESULTS]`` (no generation header: every boundary is a control
  token). The env reads it with ``tool_parser="mistral"``.

:func:`install_chat_template` puts one on a tokenizer; :func:`check_tool_template` tells
whether a template writes tools, calls and results at all, with a typed error that says
which template to use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError, UnknownNameError


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template and what a tool-calling agent needs to know about it.

    Attributes:
        name: The name in :data:`CHAT_TEMPLATES`.
        source: The Jinja text (``tokenizer.chat_template``).
        end_of_turn: The text that ends an assistant turn (the model stops there).
        tool_parser: The env's parser for the calls the template shows (``tool_parser=``).
        tokens: Markers the template expects to be single tokens of the vocabulary.
        rewrites_history: Whether rendering more messages changes how earlier ones render.
    """

    name: str
    source: str
    end_of_turn: str
    tool_parser: str
    tokens: tuple[str, ...]
    rewrites_history: bool = False
    description: str = ""


# A call as the JSON object hermes and Mistral write: {"name": ..., "arguments": {...}}.
_CALL_JSON = r"""
{%- macro call_json(call) -%}
{%- set fn = call.function if call.function is defined else call -%}
{{- '{"name": ' + (fn.name | tojson) + ', "arguments": ' -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- '}' -}}
{%- endmacro -%}
"""

# The hermes templates are built from one text; ``strip_think`` decides the think rule.
_HERMES = _CALL_JSON + r"""{%- set offset = 1 if messages and messages[0].role == 'system' else 0 -%}
{%- if tools or offset -%}
{{- '<|im_start|>system\n' -}}
{%- if offset -%}{{- messages[0].content -}}{%- if tools -%}{{- '\n\n' -}}{%- endif -%}{%- endif -%}
{%- if tools -%}
{{- 'You can call the functions below. Their signatures, as JSON schemas, are listed inside <tools></tools>:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nTo call a function, write a JSON object {"name": <function name>, "arguments": <object of arguments>} '
    'inside <tool_call></tool_call> tags, one block per call, after any text of yours. Each result comes back '
    'inside <tool_response></tool_response> tags.' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages[offset:] -%}
{%- set is_last = loop.last -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if message.role == 'tool' -%}
{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' -}}
{%- if is_last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- elif message.role == 'assistant' -%}
{%- if STRIP_THINK and not is_last and '</think>' in content -%}
{%- set content = content.split('</think>')[-1].lstrip() -%}
{%- endif -%}
{{- '<|im_start|>assistant\n' + content -}}
{%- for call in message.tool_calls or [] -%}
{%- if content or not loop.first -%}{{- '\n' -}}{%- endif -%}
{{- '<tool_call>\n' + call_json(call) + '\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

_LLAMA3 = r"""
{%- macro header(role) -%}{{- '<|start_header_id|>' + role + '<|end_header_id|>\n\n' -}}{%- endmacro -%}
{%- macro call_json(call) -%}
{%- set fn = call.function if call.function is defined else call -%}
{{- '{"name": ' + (fn.name | tojson) + ', "parameters": ' -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- '}' -}}
{%- endmacro -%}
{{- '<|begin_of_text|>' -}}
{%- set offset = 1 if messages and messages[0].role == 'system' else 0 -%}
{%- if tools or offset -%}
{{- header('system') -}}
{%- if offset -%}{{- messages[0].content -}}{%- if tools -%}{{- '\n\n' -}}{%- endif -%}{%- endif -%}
{%- if tools -%}
{{- 'You can call the functions below, given as JSON schemas:\n' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n\nTo call a function, reply with nothing but a JSON object {"name": <function name>, "parameters": '
    '<object of arguments>}; separate several calls with "; ". Each result comes back in an ipython turn.' -}}
{%- endif -%}
{{- '<|eot_id|>' -}}
{%- endif -%}
{%- for message in messages[offset:] -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if message.role == 'assistant' and message.tool_calls -%}
{{- header('assistant') -}}
{%- for call in message.tool_calls -%}{%- if not loop.first -%}{{- '; ' -}}{%- endif -%}{{- call_json(call) -}}{%- endfor -%}
{{- '<|eot_id|>' -}}
{%- elif message.role == 'tool' -%}
{{- header('ipython') + content + '<|eot_id|>' -}}
{%- else -%}
{{- header(message.role) + content + '<|eot_id|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- header('assistant') -}}{%- endif -%}
"""


_MISTRAL = _CALL_JSON + r"""{{- '<s>' -}}
{%- if tools -%}
{{- '[AVAILABLE_TOOLS][' -}}
{%- for tool in tools -%}{%- if not loop.first -%}{{- ', ' -}}{%- endif -%}{{- tool | tojson -}}{%- endfor -%}
{{- '][/AVAILABLE_TOOLS]' -}}
{%- endif -%}
{%- set offset = 1 if messages and messages[0].role == 'system' else 0 -%}
{%- for message in messages[offset:] -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if message.role == 'user' -%}
{%- if loop.first and offset -%}{%- set content = messages[0].content + '

' + content -%}{%- endif -%}
{{- '[INST]' + content + '[/INST]' -}}
{%- elif message.role == 'assistant' -%}
{{- content -}}
{%- if message.tool_calls -%}
{{- '[TOOL_CALLS][' -}}
{%- for call in message.tool_calls -%}{%- if not loop.first -%}{{- ', ' -}}{%- endif -%}{{- call_json(call) -}}{%- endfor -%}
{{- ']' -}}
{%- endif -%}
{{- '</s>' -}}
{%- elif message.role == 'tool' -%}
{{- '[TOOL_RESULTS]' + content + '[/TOOL_RESULTS]' -}}
{%- else -%}
{{- '[INST]' + content + '[/INST]' -}}
{%- endif -%}
{%- endfor -%}
"""


def _hermes(strip_think: bool) -> str:
    return "{%- set STRIP_THINK = " + ("true" if strip_think else "false") + " -%}" + _HERMES.strip()


_CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")

#: Template name -> :class:`ChatTemplate`.
CHAT_TEMPLATES: dict[str, ChatTemplate] = {
    t.name: t
    for t in (
        ChatTemplate(
            "hermes", _hermes(False), "<|im_end|>", "hermes", _CHATML_TOKENS,
            description="ChatML with <tool_call> JSON calls and <tool_response> results (SmolLM2, Qwen, Hermes)",
        ),
        ChatTemplate(
            "hermes-think", _hermes(True), "<|im_end|>", "hermes", _CHATML_TOKENS, rewrites_history=True,
            description="hermes that drops the <think> blocks of past assistant turns, as Qwen3's template does",
        ),
        ChatTemplate(
            "llama3", _LLAMA3.strip(), "<|eot_id|>", "llama3_json",
            ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
            description="Llama 3.1 JSON tool calls with ipython results",
        ),
        ChatTemplate(
            "mistral", _MISTRAL.strip(), "</s>", "mistral",
            ("<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
            description="Mistral's [TOOL_CALLS] JSON list with [TOOL_RESULTS] results",
        ),
    )
}


def template_by_name(name: str | ChatTemplate) -> ChatTemplate:
    """The template called ``name`` (a :class:`ChatTemplate` is returned as it is)."""
    if isinstance(name, ChatTemplate):
        return name
    if not isinstance(name, str) or name not in CHAT_TEMPLATES:
        raise UnknownNameError("chat template", name, CHAT_TEMPLATES)
    return CHAT_TEMPLATES[name]


def template_of(source: str | None) -> ChatTemplate | None:
    """The template of :data:`CHAT_TEMPLATES` whose text is ``source``, or None."""
    return next((t for t in CHAT_TEMPLATES.values() if t.source == source), None)


def install_chat_template(tokenizer: Any, name: str | ChatTemplate, model: Any = None) -> int:
    """Make ``name`` the chat template of ``tokenizer`` (saved with it by ``save_pretrained``).

    The template's markers missing from the vocabulary (Llama 3's headers in a ChatML
    vocabulary) are added as special tokens, and ``model``'s embeddings, if given, grow to
    the new vocabulary (the new rows are untrained). Returns how many tokens were added.
    """
    template = template_by_name(name)
    missing = [t for t in template.tokens if not _single_token(tokenizer, t)]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)
        if model is not None and model.get_input_embeddings().num_embeddings < len(tokenizer):
            model.resize_token_embeddings(len(tokenizer))
    tokenizer.chat_template = template.source
    return len(missing)


def _single_token(tokenizer: Any, text: str) -> bool:
    return len(tokenizer.encode(text, add_special_tokens=False)) == 1 and text in tokenizer.get_vocab()


def end_of_turn(tokenizer: Any, template: str | None = None) -> str | None:
    """The text that ends an assistant turn under ``template`` (a Jinja text; None: the
    tokenizer's own): the project template's marker; for another template (a model's own,
    such as Qwen3's or Llama 3.1's), the special token it writes right after an assistant
    message's text; else the tokenizer's end-of-sequence."""
    source = template if template is not None else getattr(tokenizer, "chat_template", None)
    known = template_of(source)
    if known is not None:
        return known.end_of_turn
    return _written_end_of_turn(tokenizer, source) or getattr(tokenizer, "eos_token", None)


def default_tool_parser(tokenizer: Any, template: str | None = None) -> str:
    """The env parser that reads the calls ``template`` (None: the tokenizer's) shows:
    the project template's; for another template, the form its render of a call takes
    (``[TOOL_CALLS]``: ``"mistral"``; a bare ``{"name": ..., "parameters": ...}``:
    ``"llama3_json"``); else ``"hermes"`` (the most common form)."""
    source = template if template is not None else getattr(tokenizer, "chat_template", None)
    known = template_of(source)
    if known is not None:
        return known.tool_parser
    try:
        text = tokenizer.apply_chat_template(_PROBE_MESSAGES, tools=[_PROBE_TOOL], chat_template=source, tokenize=False)
    except Exception:  # noqa: BLE001  check_tool_template names what is wrong with it
        return "hermes"
    if "<tool_call>" in text:
        return "hermes"
    if "[TOOL_CALLS]" in text:
        return "mistral"
    return "llama3_json" if '"parameters": {"probe_arg_7f3a"' in text else "hermes"


def _written_end_of_turn(tokenizer: Any, source: str | None) -> str | None:
    """The special token ``source`` writes right after an assistant message's text, or None."""
    if source is None:
        return None
    marker = "probe_reply_7f3a"
    messages = [{"role": "user", "content": "question"}, {"role": "assistant", "content": marker}]
    try:
        text = tokenizer.apply_chat_template(messages, chat_template=source, tokenize=False)
    except Exception:  # noqa: BLE001  a template that cannot render a plain exchange says nothing
        return None
    if marker not in text:
        return None
    rest = text[text.rindex(marker) + len(marker):]
    specials = {*getattr(tokenizer, "all_special_tokens", ()), *tokenizer.get_added_vocab()}
    return max((t for t in specials if t and rest.startswith(t)), key=len, default=None)


# ---------------------------------------------------------------------------- does it write tools?
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_tool_7f3a",
        "description": "probe_schema_7f3a",
        "parameters": {"type": "object", "properties": {"probe_arg_7f3a": {"type": "string"}}, "required": ["probe_arg_7f3a"]},
    },
}
_PROBE_MESSAGES = [
    {"role": "user", "content": "question"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "probe_tool_7f3a", "arguments": {"probe_arg_7f3a": "probe_value_7f3a"}}},
    ]},
    {"role": "tool", "tool_call_id": "call_0", "name": "probe_tool_7f3a", "content": "probe_result_7f3a"},
]


def check_tool_template(tokenizer: Any, template: str | None = None, *, owner: str = "The agent") -> None:
    """Raise :class:`ConfigError` unless ``template`` (None: the tokenizer's own) writes the
    tools' schemas, the assistant's calls and the tools' results, so that a model playing
    through tool calls sees the game. The error says which template to use instead."""
    source = template if template is not None else getattr(tokenizer, "chat_template", None)
    if source is None:
        raise ConfigError(
            f"{owner} plays through tool calls and needs a chat template with tools, got {type(tokenizer).__name__} without "
            f"a chat template. {_USE}"
        )
    missing = _tool_gaps(tokenizer, source)
    if missing:
        raise ConfigError(
            f"{owner} plays through tool calls, but the chat template {_describe(tokenizer, source)} does not write "
            f"{' or '.join(missing)}: the model would not see the game. {_USE}"
        )


_USE = (
    "Use one of searchgym's templates: chat_template=\"hermes\" (ChatML tokens: SmolLM2, Qwen, Hermes; "
    "\"hermes-think\" drops past <think> blocks like Qwen3), chat_template=\"llama3\" (Llama 3.1 JSON calls) or "
    "chat_template=\"mistral\" ([TOOL_CALLS]), or set tokenizer.chat_template to a template with tools."
)


def _describe(tokenizer: Any, source: str) -> str:
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return f"of {name!r}" if source == getattr(tokenizer, "chat_template", None) else "given"


def _tool_gaps(tokenizer: Any, source: str) -> list[str]:
    def render(messages: list[Mapping[str, Any]], tools: Any) -> str:
        try:
            return tokenizer.apply_chat_template(messages, tools=tools, chat_template=source, add_generation_prompt=True, tokenize=False)
        except Exception as e:  # a template may raise on roles or fields it does not know
            raise ConfigError(
                f"The chat template {_describe(tokenizer, source)} fails on a tool conversation ({type(e).__name__}: {e}). {_USE}"
            ) from None

    text = render(_PROBE_MESSAGES, [_PROBE_TOOL])
    gaps = []
    if "probe_schema_7f3a" not in text:
        gaps.append("the tools' schemas (tools=)")
    if "probe_value_7f3a" not in text:
        gaps.append("the assistant's tool calls")
    if "probe_result_7f3a" not in text:
        gaps.append("the tools' results")
    return gaps
