"""Every game played through tool calls under the chat templates models ship (TRL's upstream
copies of Qwen2.5's, Qwen3's and Llama 3.1's) and the project's own, by a scripted model that
writes well-formed, malformed, parallel, prose and cut turns.

Each record must be what the model emitted (generated segments: the scripted ids, through the
end of turn or cut at ``max_new_tokens``), env segments masked (they hold the env's new messages),
and a fresh render of the conversation that differs from the record is marked, never raised.
"""

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from agents.test_tool_records import play
from env_helpers import make_small
from searchgym.agents.driver import Task, run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.agents.tokens import observation_text, render_chat
from searchgym.envs.tools.parsers import TOOL_WRITERS
from searchgym.lm.chat_templates import CHAT_TEMPLATES, default_tool_parser, end_of_turn, install_chat_template
from searchgym.lm.scripted import ScriptedLM

pytestmark = pytest.mark.filterwarnings("ignore:.*a token record differs from a fresh render:UserWarning")

ENV_IDS = ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/S3-v0", "searchgym/RSearch-v0",
           "searchgym/DeepResearch-v0"]
#: The browse game over the small synthwiki world (its own world's options differ), snippets kept short.
_DEEP = {"corpus": "synthwiki", "dataset": "synthwiki", "protocol_options": {"snippet_words": 60}}
SHIPPED = ["qwen2_5", "qwen3", "llama3_1"]  # TRL's copies of the templates the models ship that write tool calls
MAX_NEW_TOKENS = 96


def shipped_source(name):
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("TRL is not installed: its upstream chat templates (trl/chat_templates/*.jinja) are read from it")
    path = Path(next(iter(spec.submodule_search_locations))) / "chat_templates" / f"{name}.jinja"
    if not path.exists():
        pytest.skip(f"this TRL has no {path.name}")
    return path.read_text()


@pytest.fixture(scope="module")
def smollm2_base():
    from searchgym.lm.models import smollm2_tokenizer

    return smollm2_tokenizer()


def tokenizer_for(base, template):
    """SmolLM2's tokenizer (ChatML tokens) with ``template`` as its own chat template."""
    tok = copy.deepcopy(base)
    if template in CHAT_TEMPLATES:
        install_chat_template(tok, template)
    else:
        if template.startswith("llama"):
            install_chat_template(tok, "llama3")  # adds Llama 3's header tokens
        tok.chat_template = shipped_source(template)
    return tok


_ENVS = {}


def env_for(env_id, parser):
    if (env_id, parser) not in _ENVS:
        extra = _DEEP if env_id.endswith("DeepResearch-v0") else {}
        _ENVS[env_id, parser] = make_small(env_id, action_format="tools", tool_parser=parser, **extra)
    return _ENVS[env_id, parser]


def scripts(env_id, parser, eot, think):
    """Two episodes of turns in the template's form: (search, malformed, parallel, prose) and
    (cut, final call). ``think``: Qwen3 reasons in a <think> block first."""
    write = TOOL_WRITERS[parser]
    reason = "<think>\nThe question names a founder; search first.\n</think>\n\n" if think else ""
    final = ("finish", {}) if env_id.endswith("S3-v0") else ("answer", {"answer": "Nowhere", "evidence": "none"}) \
        if env_id.endswith("RSearch-v0") else ("answer", {"answer": "Nowhere"})
    malformed = {"hermes": '<tool_call>\n{"name": "search", "arguments": {bad\n</tool_call>',
                 "llama3_json": '{"name": "search", "parameters": {bad', "mistral": "[TOOL_CALLS][{bad"}[parser]
    one = [
        reason + write("", [("search", {"query": "founder of the city"})]) + eot,
        malformed + eot,
        write("", [("search", {"query": "river"}), ("search", {"query": "city"})]) + eot,
        "I have read enough; the answer is Nowhere." + eot,  # prose: the answer, or s3's reply without a call
    ]
    if env_id.endswith("S3-v0"):  # s3 answers prose with a user message: play it before its last turn
        one = [one[0], one[3], one[1], one[2]]
    cut = write("", [("search", {"query": " ".join(["a very long query about the founder"] * 40)})]) + eot
    two = [cut, write("", [final]) + eot]
    return [one, two]


def check_record(tok, record, turns, infos, eot):
    # Generated segments: exactly the scripted ids, through the end of turn or cut at max_new_tokens.
    generated = [s for s in record.segments if s.generated]
    assert [s.token_ids for s in generated] == [tuple(tok.encode(t, add_special_tokens=False)[:MAX_NEW_TOKENS]) for t in turns[: len(generated)]]
    assert all(s.logprobs is not None for s in generated)
    # Env segments: masked, and they hold the env's new messages.
    mask = iter(record.loss_mask)
    for s in record.segments:
        assert [next(mask) for _ in s.token_ids] == [int(s.generated)] * len(s)
    observed = [tok.decode(s.token_ids) for s in record.segments if not s.generated]
    seen = len(infos[0]["messages"])
    for text, info in zip(observed, infos[1:]):
        messages = info["messages"]
        for m in messages[seen + 1:]:
            # (Llama 3.1's template writes a string result as JSON: a string is "iterable" to it.)
            assert m["content"].strip() in text or json.dumps(m["content"], ensure_ascii=False) in text
        seen = len(messages)
    # A fresh render of the conversation through the last turn that differs from the record is marked.
    last = infos[-1]
    messages = last["messages"][: seen + 1]
    try:
        fresh = render_chat(tok, messages, last["tools"], generation_prompt=False)
    except Exception:  # noqa: BLE001  a template that refuses the conversation (Llama 3.1: one call per turn)
        assert record.render_mismatch is not None
        return
    fresh = fresh[: fresh.rindex(eot) + len(eot)] if eot in fresh else fresh
    if tok.encode(fresh, add_special_tokens=False) != record.context_ids():
        assert record.render_mismatch is not None


@pytest.mark.parametrize("template", SHIPPED + list(CHAT_TEMPLATES))
def test_every_game_plays_under_the_template_and_keeps_its_record(smollm2_base, template):
    tok = tokenizer_for(smollm2_base, template)
    eot, parser = end_of_turn(tok), default_tool_parser(tok)
    assert eot == {"llama3_1": "<|eot_id|>", "llama3": "<|eot_id|>", "mistral": "</s>"}.get(template, "<|im_end|>")
    assert parser == {"llama3_1": "llama3_json", "llama3": "llama3_json", "mistral": "mistral"}.get(template, "hermes")
    play_every_game(tok, parser, eot, think=template in ("qwen3", "hermes-think"), cut_closed_by_eot=True)


def play_every_game(tok, parser, eot, *, think, cut_closed_by_eot):
    """Both scripts of every game under ``tok``'s template, each record checked; with
    ``cut_closed_by_eot``, the observation after the cut turn must open with ``eot``."""
    marked = 0
    for env_id in ENV_IDS:
        env = env_for(env_id, parser)
        for index, turns in enumerate(scripts(env_id, parser, eot, think)):
            agent = policy_agent(env, ScriptedLM(turns, tok), max_new_tokens=MAX_NEW_TOKENS)
            infos, record = play(env, agent, index=index)
            check_record(tok, record, turns, infos, eot)
            marked += record.render_mismatch is not None
            if index == 1:  # the cut turn: a bad call the env answered, closed by the observation
                assert infos[1]["invalid_reason"] and record.segments[0].finish_reason == "length"
                if cut_closed_by_eot:
                    assert tok.decode(record.segments[1].token_ids).startswith(eot)
    assert marked >= len(ENV_IDS)  # every cut turn at least is not the template's writing of its message


def test_qwen3_marks_the_history_it_rewrites_and_renders_the_reply_after_a_user_message_exactly(smollm2_base):
    tok = tokenizer_for(smollm2_base, "qwen3")
    messages = [
        {"role": "user", "content": "Who founded it?"},
        {"role": "assistant", "content": "<think>\nsearch\n</think>\n\nLet me think."},
        {"role": "user", "content": "Your reply has no tool call."},
    ]
    text, rewritten = observation_text(tok, messages, [], since=2, end_of_turn="<|im_end|>", closed=True)
    assert rewritten and text == "\n<|im_start|>user\nYour reply has no tool call.<|im_end|>\n<|im_start|>assistant\n"
    # Cut at max_new_tokens: the observation closes the turn first.
    text, _ = observation_text(tok, messages, [], since=2, end_of_turn="<|im_end|>", closed=False)
    assert text.startswith("<|im_end|>\n<|im_start|>user\n")


def test_llama31_refuses_parallel_calls_and_the_episode_plays_on_marked(smollm2_base):
    tok = tokenizer_for(smollm2_base, "llama3_1")
    env = env_for("searchgym/SearchR1-v0", "llama3_json")
    write = TOOL_WRITERS["llama3_json"]
    turns = [write("", [("search", {"query": "river"}), ("search", {"query": "city"})]) + "<|eot_id|>",
             write("", [("answer", {"answer": "Nowhere"})]) + "<|eot_id|>"]
    agent = policy_agent(env, ScriptedLM(turns, tok), max_new_tokens=MAX_NEW_TOKENS)
    infos, record = play(env, agent)
    assert [m["role"] for m in infos[1]["messages"]][-2:] == ["tool", "tool"] and infos[-1]["prediction"] == "Nowhere"
    assert record.render_mismatch == "template"
    observed = tok.decode(record.segments[1].token_ids)
    assert observed.count("<|start_header_id|>ipython<|end_header_id|>") == 2 and observed.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_the_final_turn_is_checked_too(smollm2_base):
    # hermes: a clean episode ends unmarked; a final turn the template writes otherwise is marked.
    tok = tokenizer_for(smollm2_base, "hermes")
    env = env_for("searchgym/SearchR1-v0", "hermes")
    write = TOOL_WRITERS["hermes"]
    clean = [write("", [("search", {"query": "river"})]) + "<|im_end|>", write("", [("answer", {"answer": "Nowhere"})]) + "<|im_end|>"]
    agent = policy_agent(env, ScriptedLM(clean, tok), max_new_tokens=MAX_NEW_TOKENS)
    _, record = play(env, agent)
    assert record.render_mismatch is None
    # Two spaces before the call: the env's message keeps the call, the template writes it without them.
    odd = [clean[0], "  " + clean[1]]
    agent = policy_agent(env, ScriptedLM(odd, tok), max_new_tokens=MAX_NEW_TOKENS)
    infos, record = play(env, agent)
    assert infos[-1]["prediction"] == "Nowhere" and record.render_mismatch == "turn"
    # The driver hands the last info over too.
    agent = policy_agent(env, ScriptedLM(odd, tok), max_new_tokens=MAX_NEW_TOKENS)
    (result,) = run_episodes([env], agent, [Task(env.unwrapped.examples[0].id)], keep_trajectories=True)
    assert result.trajectory.render_mismatch == "turn" and "render_mismatch" in result.flags


@pytest.mark.parametrize("mode", ["rounds", "async"])
def test_one_episode_whose_record_fails_ends_alone(smollm2_base, mode):
    # A template that raises on the env's feedback to a malformed call: that episode's record cannot be kept.
    source = ("{%- for m in messages %}{%- if m.role == 'user' and 'JSON' in (m.content or '') %}"
              "{{- raise_exception('this template refuses feedback') }}{%- endif %}{%- endfor %}" + CHAT_TEMPLATES["hermes"].source)
    tok = tokenizer_for(smollm2_base, "hermes")
    tok.chat_template = source
    envs = [make_small("searchgym/SearchR1-v0", action_format="tools") for _ in range(3)]
    examples = envs[0].unwrapped.examples[:3]
    write = TOOL_WRITERS["hermes"]

    def respond(prompt):
        turn = prompt.count("<|im_start|>assistant") - 1
        if examples[1].question in prompt and turn == 0:
            return '<tool_call>\n{"name": "search", "arguments": {bad\n</tool_call><|im_end|>'
        return write("", [("search", {"query": "river"})] if turn == 0 else [("answer", {"answer": "Nowhere"})]) + "<|im_end|>"

    class ConcurrentScriptedLM(ScriptedLM):
        concurrent = True  # the async driver plays each episode's turn as a call of its own

    agent = policy_agent(envs[0], ConcurrentScriptedLM(respond, tok), max_new_tokens=MAX_NEW_TOKENS)
    results = run_episodes(envs, agent, [Task(e.id) for e in examples], mode=mode, concurrency=3 if mode == "async" else None)
    assert [r.outcome for r in results] == ["answered", "error", "answered"]
    assert results[1].error.startswith("TemplateError: this template refuses feedback")
    assert [r.prediction for r in results] == ["Nowhere", None, "Nowhere"]
    # Outside a driver, act raises the episode's error.
    observation, info = envs[1].reset(options={"example_id": examples[1].id})
    agent.act([observation], [info])
    observation, _, _, _, info = envs[1].step('<tool_call>\n{"name": "search", "arguments": {bad\n</tool_call>')
    with pytest.raises(Exception, match="this template refuses feedback"):
        agent.act([observation], [info])
    assert results[0].error is None and results[2].error is None
