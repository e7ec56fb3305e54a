"""Every chat template the installed TRL ships (``trl/chat_templates/*.jinja``, its upstream
copies of the templates models ship), each game through tool calls.

Each template is played on SmolLM2's tokenizer with the template's own markers (``<|eot_id|>``,
``<end_of_turn>``, ``<|END_OF_TURN_TOKEN|>``, ...) added as special tokens, as a model of
that family has them. A template that writes tools, calls and results plays all six games (the papers' five and the browse game)
with the scripted turns of test_shipped_templates (well-formed, malformed, parallel, prose,
cut): no exception, the record what the model emitted, env segments masked, a fresh render
that differs marked. The others are listed in :data:`SKIPPED` with the reason, which the
test checks is still the reason (docs/tools.md lists them too).
"""

import copy
import importlib.util
import re
from pathlib import Path

import pytest

from agents.test_shipped_templates import play_every_game
from searchgym.error import ConfigError
from searchgym.lm.chat_templates import check_tool_template, default_tool_parser, end_of_turn

pytestmark = pytest.mark.filterwarnings("ignore:.*a token record differs from a fresh render:UserWarning")


def _folder() -> Path | None:
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "chat_templates"
    return folder if folder.is_dir() else None


FOLDER = _folder()
NAMES = sorted(p.stem for p in FOLDER.glob("*.jinja")) if FOLDER else []

#: Templates that cannot play a tool conversation, by name, with why.
NO_TOOLS = "does not write the tools' schemas (no tool support)"
NO_CALLS = "does not write the assistant's tool calls"
ALTERNATION = "refuses a tool message (roles must alternate user/assistant)"
VISION = "a vision template: it reads message content as a list of parts and fails on text"
RAISES = "raises on a tool conversation"
SKIPPED = {
    "cohere": ALTERNATION, "cohere_training": ALTERNATION,
    "cohere2": NO_TOOLS, "cohere2_training": NO_TOOLS,
    "deepseek_r1_distill": NO_TOOLS, "deepseek_r1_distill_training": NO_TOOLS,
    "deepseekv3": RAISES, "deepseekv3_training": NO_TOOLS,
    "gemma": ALTERNATION, "gemma_training": ALTERNATION, "gemma3": ALTERNATION, "gemma3_training": ALTERNATION,
    "idefics3": VISION, "idefics3_training": VISION, "llava_next": VISION, "llava_next_training": VISION,
    "smolvlm": VISION, "smolvlm_training": VISION,
    "lfm2": NO_CALLS, "lfm2_training": NO_CALLS,
    "llama3": NO_TOOLS, "llama3_training": NO_TOOLS,
    "phi3": NO_TOOLS, "phi3_training": NO_TOOLS, "phi3_5": NO_TOOLS, "phi3_5_training": NO_TOOLS,
    "qwen2_5_vl": NO_TOOLS, "qwen2_5_vl_training": NO_TOOLS,
}
#: A training variant (``{% generation %}`` marks for TRL's assistant masks) that renders a
#: tool conversation exactly as its base template: played once, as the base.
SAME_AS_BASE = "a training variant that renders a tool conversation exactly as its base"
#: These render otherwise than their bases (past reasoning kept for the masks): played too.
TRAINING_OWN = {"glm4moe_training", "qwen3_training", "qwen3_5_nothink_training", "qwen3_5_think_training", "qwen3_6_training"}
TRAINING_SAME = {
    n for n in NAMES if n.endswith("_training") and n.removesuffix("_training") in NAMES and n not in SKIPPED
} - TRAINING_OWN
PLAYED = [n for n in NAMES if n not in SKIPPED and n not in TRAINING_SAME]

#: A template's own markers: what a model of its family has as single tokens.
MARKERS = re.compile(r"<\|[^|<>\s'\"]{1,40}\|>|<(?:start_of_turn|end_of_turn)>|\[/?(?:INST|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS)\]")


@pytest.fixture(scope="module")
def smollm2_base():
    from searchgym.lm.models import smollm2_tokenizer

    return smollm2_tokenizer()


def family_tokenizer(base, name):
    """SmolLM2's tokenizer with TRL's ``name`` template and its markers as special tokens."""
    source = source_of(name)
    tok = copy.deepcopy(base)
    tok.add_tokens(sorted({m for m in MARKERS.findall(source) if m not in tok.get_vocab()}), special_tokens=True)
    tok.chat_template = source
    return tok


def source_of(name: str) -> str:
    return (FOLDER / f"{name}.jinja").read_text()


def why_not(tok, source: str) -> str | None:
    """The reason of :data:`SKIPPED` the template ``source`` cannot play, or None when it can."""
    try:
        check_tool_template(tok, source)
    except ConfigError as e:
        text = str(e)
        if "Conversation roles must alternate" in text:
            return ALTERNATION
        if "has no element 0" in text:
            return VISION
        if "fails on a tool conversation" in text:
            return RAISES
        return NO_TOOLS if "the tools' schemas" in text else NO_CALLS
    return None


#: A tool conversation with what the games write: a system message, reasoning, parallel
#: calls, their results, a user message answering a reply without a call, a final answer.
RICH = [
    {"role": "system", "content": "Answer the question."},
    {"role": "user", "content": "Who founded the city?"},
    {"role": "assistant", "content": "<think>\nSearch first.\n</think>\n\nSearching.", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "search", "arguments": {"query": "river"}}},
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"query": "city"}}}]},
    {"role": "tool", "tool_call_id": "c0", "name": "search", "content": "Doc 1 the river"},
    {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "Doc 1 the city"},
    {"role": "assistant", "content": "I think so."},
    {"role": "user", "content": "Error: the reply has no tool call."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "answer", "arguments": {"answer": "Nowhere"}}}]},
]
TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object", "properties": {
    a: {"type": "string", "description": a}}, "required": [a]}}} for n, a in (("search", "query"), ("answer", "answer"))]


@pytest.mark.skipif(FOLDER is None, reason="TRL is not installed: its chat templates (trl/chat_templates/*.jinja) are read from it")
def test_every_trl_template_is_played_or_skipped_for_its_stated_reason(smollm2_base):
    assert set(SKIPPED) <= set(NAMES), "a template listed as skipped is no longer in TRL"
    tok = smollm2_base  # rendering reads no vocabulary: one tokenizer renders every template

    def render(name, end, prompt):
        return tok.apply_chat_template(RICH[:end], tools=TOOLS, chat_template=source_of(name), add_generation_prompt=prompt, tokenize=False)

    assert {n: why_not(tok, source_of(n)) for n in NAMES} == {n: SKIPPED.get(n) for n in NAMES}
    for name in TRAINING_SAME:  # played as its base: every render the same
        for end in range(2, len(RICH) + 1):
            for prompt in (False, True):
                assert render(name, end, prompt) == render(name.removesuffix("_training"), end, prompt), (name, end, prompt)
    for name in TRAINING_OWN & set(NAMES):  # played on their own: some render differs
        assert any(render(name, end, prompt) != render(name.removesuffix("_training"), end, prompt)
                   for end in range(2, len(RICH) + 1) for prompt in (False, True)), name


@pytest.mark.parametrize("name", PLAYED or [pytest.param(None, marks=pytest.mark.skip(reason="TRL is not installed"))])
def test_every_game_plays_under_the_trl_template_and_keeps_its_record(smollm2_base, name):
    tok = family_tokenizer(smollm2_base, name)
    eot, parser = end_of_turn(tok), default_tool_parser(tok)
    play_every_game(tok, parser, eot, think="<think>" in tok.chat_template, cut_closed_by_eot=False)
