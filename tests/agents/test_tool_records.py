"""Token records of tool play under chat templates, on the packaged SmolLM2 tokenizer.

Each record is checked against a fresh render of the whole conversation by the template;
where the template rewrites history (hermes-think drops past <think> blocks), the test shows
what the agent keeps instead.
"""

import json
import warnings

import pytest

from env_helpers import make_small
from searchgym.agents.lm_agents import LMAgent, policy_agent
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.agents.tokens import observation_text, render_chat
from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.chat_templates import CHAT_TEMPLATES, check_tool_template, install_chat_template
from searchgym.lm.scripted import ScriptedLM

pytestmark = pytest.mark.filterwarnings("error::UserWarning")  # a mismatch warning where none is expected fails


@pytest.fixture(scope="module")
def smollm2_base():
    from searchgym.lm.models import smollm2_tokenizer

    return smollm2_tokenizer()


def smollm2(base, template=None):
    import copy

    tok = copy.deepcopy(base)
    if template is not None:
        install_chat_template(tok, template)
    return tok


def hermes_turn(content, *calls):
    blocks = [f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>' for name, args in calls]
    return "\n".join(([content] if content else []) + blocks)


def llama3_turn(*calls):
    return "; ".join(json.dumps({"name": name, "parameters": args}) for name, args in calls) + "<|eot_id|>"


def mistral_turn(content, *calls):
    return content + "[TOOL_CALLS][" + ", ".join(json.dumps({"name": name, "arguments": args}) for name, args in calls) + "]</s>"


def play(env, agent, *, index=0):
    """One episode; every info the agent read and the record."""
    observation, info = env.reset(options={"example_index": index})
    infos = [info]
    while True:
        (action,) = agent.act([observation], [info])
        observation, _, terminated, truncated, info = env.step(action)
        infos.append(info)
        if terminated or truncated:
            agent.observe_end(0, info)  # the final turn is checked too
            return infos, agent.end_episode(0)


def episode_turns(env, style):
    """A search, two parallel searches, then the gold answer, in the template's form."""
    gold = env.unwrapped.examples[0].answers[0]
    if style == "llama3":
        return [llama3_turn(("search", {"query": "founder"})), llama3_turn(("search", {"query": "river"}), ("search", {"query": "city"})),
                llama3_turn(("answer", {"answer": gold}))]
    if style == "mistral":
        return [mistral_turn("I will look it up.", ("search", {"query": "founder"})),
                mistral_turn("", ("search", {"query": "river"}), ("search", {"query": "city"})),
                mistral_turn("Found it.", ("answer", {"answer": gold}))]
    return [hermes_turn("I will look it up.", ("search", {"query": "founder"})),
            hermes_turn("", ("search", {"query": "river"}), ("search", {"query": "city"})),
            hermes_turn("Found it.", ("answer", {"answer": gold}))]


@pytest.mark.parametrize("template", ["hermes", "mistral"])
def test_the_record_of_a_tool_episode_equals_a_fresh_render_of_the_whole_conversation(smollm2_base, template):
    spec = CHAT_TEMPLATES[template]
    env = make_small("searchgym/SearchR1-v0", action_format="tools", tool_parser=spec.tool_parser)
    tok = smollm2(smollm2_base, template)
    turns = episode_turns(env, template)
    agent = policy_agent(env, ScriptedLM(turns, tok))
    infos, record = play(env, agent)
    assert infos[-1]["prediction"] == env.unwrapped.examples[0].answers[0]
    assert record.render_mismatch is None and not agent.render_mismatches
    messages, tools = infos[-1]["messages"], infos[-1]["tools"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    fresh = tok.encode(render_chat(tok, messages, tools, generation_prompt=False), add_special_tokens=False)
    tail = tok.encode("\n" if template == "hermes" else "", add_special_tokens=False)  # what ChatML writes after <|im_end|>
    assert record.context_ids() + tail == fresh

    # Generated ids: each turn as sampled, through the end of its turn; masked in (1).
    generated = [s for s in record.segments if s.generated]
    eot = spec.end_of_turn
    assert [tok.decode(s.token_ids) for s in generated] == [t.removesuffix(eot) + eot for t in turns]
    # Observation ids: the template's rendering of the step's tool messages and the next header; masked out (0).
    observed = [tok.decode(s.token_ids) for s in record.segments if not s.generated]
    if template == "hermes":
        assert observed[1] == ("\n<|im_start|>user\n<tool_response>\n" + messages[4]["content"] + "\n</tool_response>\n<tool_response>\n"
                               + messages[5]["content"] + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    else:  # no generation header: the next turn follows the results
        assert observed[1] == "[TOOL_RESULTS]" + messages[4]["content"] + "[/TOOL_RESULTS][TOOL_RESULTS]" + messages[5]["content"] + "[/TOOL_RESULTS]"
    assert [s.generated for s in record.segments] == [True, False, True, False, True]
    assert record.loss_mask == [int(s.generated) for s in record.segments for _ in s.token_ids]
    assert all(lp is None for s, lp in zip([s for s in record.segments for _ in s.token_ids], record.response_logprobs) if not s.generated)


def test_llama3_on_smollm2s_vocabulary_keeps_the_text_of_a_fresh_render_but_not_every_id(smollm2_base):
    """The Llama 3 assistant header ends in "\n\n": alone (the end of the prompt the model reads)
    SmolLM2's pre-tokenizer makes it one token, before "{" two. The record keeps what the model read."""
    env = make_small("searchgym/SearchR1-v0", action_format="tools", tool_parser="llama3_json")
    tok = smollm2(smollm2_base, "llama3")
    agent = policy_agent(env, ScriptedLM(episode_turns(env, "llama3"), tok))
    with pytest.warns(UserWarning, match=r"the same text, tokenized in one piece, splits into other tokens than its parts did"):
        infos, record = play(env, agent)
    assert infos[-1]["prediction"] == env.unwrapped.examples[0].answers[0]
    assert record.render_mismatch == "tokens"
    fresh = render_chat(tok, infos[-1]["messages"], infos[-1]["tools"], generation_prompt=False)
    assert tok.decode(record.context_ids()) == fresh
    assert tok.encode("<|end_header_id|>\n\n", add_special_tokens=False)[1:] == tok.encode("\n\n", add_special_tokens=False)
    assert tok.encode("\n\n{", add_special_tokens=False)[:2] == tok.encode("\n", add_special_tokens=False) * 2


def test_a_template_that_drops_past_think_blocks_leaves_the_record_as_sampled_and_says_so(smollm2_base):
    env = make_small("searchgym/SearchR1-v0", action_format="tools")
    gold = env.unwrapped.examples[0].answers[0]
    think = "<think>The founder is unknown to me; search.</think>"
    turns = [hermes_turn(think + "\nSearching.", ("search", {"query": "founder"})),
             hermes_turn("<think>The documents name it.</think>", ("answer", {"answer": gold}))]
    prompts = []

    def respond(prompt):
        prompts.append(prompt)
        return turns[(len(prompts) - 1) % 2]

    tok = smollm2(smollm2_base, "hermes-think")
    agent = policy_agent(env, ScriptedLM(respond, tok))
    with pytest.warns(UserWarning, match=r"^EndToEndAgent: a token record differs from a fresh render of its conversation: the chat "
                      r"template rewrote earlier turns \(e\.g\. dropped past <think> blocks\)\. The agent keeps its own record"):
        infos, record = play(env, agent)
    assert record.render_mismatch == "history" and agent.render_mismatches == {"history": 1}
    messages, tools = infos[-1]["messages"], infos[-1]["tools"]
    # A fresh render of the conversation has lost the first turn's reasoning ...
    fresh = render_chat(tok, messages, tools, generation_prompt=False)
    assert think not in fresh
    # ... but the model read it on its second turn: its context is the record, the ids it sampled.
    assert think in prompts[1] and prompts[1] == tok.decode(record.prompt_ids + record.segments[0].token_ids + record.segments[1].token_ids)
    # What the agent keeps is the conversation as it was written: the render of a template that keeps history.
    keeping = tok.encode(render_chat(tok, messages, tools, template=CHAT_TEMPLATES["hermes"].source, generation_prompt=False), add_special_tokens=False)
    assert record.context_ids() == keeping[: len(record)]
    # The observation ids are the same under both templates: only the history differs.
    kept_agent = LMAgent(ScriptedLM(turns, smollm2(smollm2_base)), "search_r1", chat_template="hermes")
    _, kept = play(env, kept_agent)
    assert record.segments[1].token_ids == kept.segments[1].token_ids and kept.render_mismatch is None
    # Later mismatches are counted, not warned again.
    prompts.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        play(env, agent)
    assert agent.render_mismatches == {"history": 2}
    # The driver flags the episode.
    from searchgym.agents.driver import Task, run_episodes

    (result,) = run_episodes([env], agent, [Task(env.unwrapped.examples[0].id)])
    assert "render_mismatch" in result.flags


def test_a_turn_cut_at_max_new_tokens_is_closed_by_the_observation(smollm2_base):
    env = make_small("searchgym/SearchR1-v0", action_format="tools", max_turns=2)
    tok = smollm2(smollm2_base, "hermes")
    turn = hermes_turn("I will look it up.", ("search", {"query": "founder"}))
    agent = policy_agent(env, ScriptedLM([turn], tok), max_new_tokens=12)  # cut inside the <tool_call> block: a bad call
    with pytest.warns(UserWarning, match="a sampled turn is not the chat template's writing of the message the env read from it"):
        infos, record = play(env, agent)
    assert "not closed with </tool_call>" in infos[1]["invalid_reason"]
    assert record.segments[0].token_ids == tuple(tok.encode(turn, add_special_tokens=False)[:12])
    assert tok.decode(record.segments[1].token_ids).startswith("<|im_end|>\n<|im_start|>user\n")
    assert record.render_mismatch == "turn"


def test_smollm2s_own_template_has_no_tools_and_the_error_names_the_template_to_use(smollm2_base):
    env = make_small("searchgym/SearchR1-v0", action_format="tools")
    agent = policy_agent(env, ScriptedLM(["x"], smollm2(smollm2_base)))
    observation, info = env.reset()
    with pytest.raises(ConfigError) as e:
        agent.act([observation], [info])
    assert str(e.value) == (
        f"EndToEndAgent plays through tool calls, but the chat template of {smollm2_base.name_or_path!r} does not write the tools' "
        "schemas (tools=) or the assistant's tool calls: the model would not see the game. Use one of searchgym's templates: "
        "chat_template=\"hermes\" (ChatML tokens: SmolLM2, Qwen, Hermes; \"hermes-think\" drops past <think> blocks like Qwen3), "
        "chat_template=\"llama3\" (Llama 3.1 JSON calls) or chat_template=\"mistral\" ([TOOL_CALLS]), or set tokenizer.chat_template "
        "to a template with tools."
    )
    # The agent option renders with the project's template and leaves the tokenizer's own alone.
    tok = smollm2(smollm2_base)
    agent = policy_agent(env, ScriptedLM(["x"], tok), chat_template="hermes")
    agent.act([observation], [info])
    assert "<tools>" in tok.decode(agent.trajectory(0).prompt_ids) and tok.chat_template == smollm2_base.chat_template


def test_template_and_parser_mismatches_are_config_errors(smollm2_base):
    with pytest.raises(ConfigError, match=r"^LMAgent got chat_template='llama3', whose markers <\|begin_of_text\|>, <\|start_header_id\|>, "
                       r"<\|end_header_id\|>, <\|eot_id\|> are not tokens of this tokenizer\. searchgym\.lm\.chat_templates\.install_chat_template"):
        LMAgent(ScriptedLM(["x"], smollm2(smollm2_base)), chat_template="llama3")
    tok = smollm2(smollm2_base)
    assert install_chat_template(tok, "llama3") == 4 and install_chat_template(tok, "llama3") == 0
    env = make_small("searchgym/SearchR1-v0", action_format="tools")  # reads hermes calls
    with pytest.raises(ConfigError) as e:
        policy_agent(env, ScriptedLM(["x"], tok))
    assert str(e.value) == (
        "EndToEndAgent writes tool calls the 'llama3_json' parser reads (its chat template's form), but the env reads turns with "
        "tool_parser='hermes'. Make the env with tool_parser='llama3_json', or give the agent the chat_template whose calls "
        "'hermes' reads."
    )
    with pytest.raises(UnknownNameError, match=r"^Unknown chat template 'chatml'\. Expected one of: hermes, hermes-think, llama3, mistral\.$"):
        LMAgent(ScriptedLM(["x"], tok), chat_template="chatml")


def test_a_tool_episode_refuses_max_observation_tokens(smollm2_base):
    # A cut tool result is no longer the template's render of the message the env wrote.
    env = make_small("searchgym/SearchR1-v0", action_format="tools")
    agent = policy_agent(env, ScriptedLM(["x"], smollm2(smollm2_base, "hermes")), max_observation_tokens=500)
    observation, info = env.reset(options={"example_index": 0})
    with pytest.raises(ConfigError) as e:
        agent.act([observation], [info])
    assert str(e.value) == (
        "EndToEndAgent got max_observation_tokens=500 for a tool episode: a tool result is a message of the chat template, "
        "and a cut one would no longer be what a fresh render of the conversation gives. Drop max_observation_tokens for "
        "action_format='tools' (the env's top_k bounds what a search returns)."
    )


def test_a_template_whose_replies_depend_on_the_whole_conversation_is_marked_not_refused(smollm2_base):
    # Every line counts the messages: no render is a prefix of a longer one. The reply is read past the
    # opening the renders share, and the step says the template rewrote history (the agent marks the record).
    counting = ("{% for m in messages %}{{ m.role }} {{ messages | length }}: {{ m.content }}{{ tools | length }}\n{% endfor %}"
                "{% if add_generation_prompt %}assistant:{% endif %}")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "r"}]
    text, rewritten = observation_text(smollm2_base, messages, [], since=2, end_of_turn=None, closed=True, template=counting)
    assert rewritten and text.endswith("tool 2: r0\nassistant:")


def test_check_tool_template_names_what_a_template_leaves_out(smollm2_base):
    no_results = CHAT_TEMPLATES["hermes"].source.replace("content + '\\n</tool_response>'", "'\\n</tool_response>'")
    with pytest.raises(ConfigError, match=r"the chat template given does not write the tools' results: the model would not see the game"):
        check_tool_template(smollm2_base, no_results)
    for template in CHAT_TEMPLATES.values():
        check_tool_template(smollm2(smollm2_base, template.name))


def test_a_real_model_over_the_smollm2_vocabulary_keeps_its_sampled_ids(smollm2_base):
    pytest.importorskip("torch")
    from searchgym.lm.hf import TransformersLM
    from searchgym.lm.testing import tiny_causal_lm_for

    tok = smollm2(smollm2_base, "hermes")
    lm = TransformersLM(tiny_causal_lm_for(tok, context=2048), tok)
    env = make_small("searchgym/SearchR1-v0", action_format="tools")
    agent = policy_agent(env, lm, max_new_tokens=12)
    observation, info = env.reset(options={"example_index": 0})
    (text,), (generation,) = agent.act_with_generations([observation], [info])
    record = agent.trajectory(0)
    assert record.prompt_ids == tuple(tok.encode(render_chat(tok, info["messages"], info["tools"], generation_prompt=True), add_special_tokens=False))
    assert record.segments[0].token_ids == generation.token_ids and record.segments[0].logprobs == generation.logprobs
    assert text == generation.text  # the raw turn is the env's action


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/S3-v0", "searchgym/RSearch-v0"])
def test_the_oracle_scores_the_same_through_tool_calls_as_through_tags(env_id):
    from searchgym.agents.base import play_episode

    rewards = {}
    for action_format in ("tags", "tools"):
        env = make_small(env_id, action_format=action_format)
        oracle = SynthWikiOracle.for_env(env)
        rewards[action_format] = [play_episode(env, oracle, options={"example_index": i})[0] for i in range(4)]
    assert rewards["tools"] == rewards["tags"] and max(rewards["tags"]) > 0
