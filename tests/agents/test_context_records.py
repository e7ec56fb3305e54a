"""Token records across context rewrites: one record per conversation, each exact against a
fresh render of its own conversation; every trained id was sampled by the policy."""

import json

import pytest

from env_helpers import make_small
from searchgym.agents.driver import run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.agents.live import Task
from searchgym.agents.tokens import prompt_ids, render_chat
from searchgym.lm.scripted import ScriptedLM


def scripted(tokenizer, search, summary, answer):
    """Searches until the env asks for a summary, writes it, then answers."""
    state = {"summarized": False}

    def respond(prompt):
        if prompt.rstrip().endswith(("this summary.", "this summary.<|im_end|>\n<|im_start|>assistant")) or \
                "restart from the question and this summary." in prompt[-400:]:
            state["summarized"] = True
            return summary
        return answer if state["summarized"] else search

    return ScriptedLM(respond, tokenizer)


def check_generated(record, sampled):
    """Every id the mask trains is one the model sampled, in order; no other id is trained."""
    trained = [t for t, m in zip(record.response_ids, record.loss_mask) if m]
    assert trained == [t for s in record.segments if s.generated for t in s.token_ids]
    assert [s.token_ids for s in record.segments if s.generated] == sampled[: len([s for s in record.segments if s.generated])]
    del sampled[: len([s for s in record.segments if s.generated])]


def test_tag_records_restart_from_a_fresh_render_of_the_summarized_conversation():
    from searchgym.lm.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    env = make_small("searchgym/SearchR1-v0", max_turns=6, context="summarize", context_options={"max_tokens": 1})
    lm = scripted(tok, "<search>founder</search>", "<summary>I searched the founder.</summary>", "<answer>nobody</answer>")
    agent = policy_agent(env, lm, max_new_tokens=40)
    sampled = []
    original = lm.generate

    def generate(*args, **kwargs):
        out = original(*args, **kwargs)
        sampled.extend(g.token_ids for g in out)
        return out

    lm.generate = generate
    example = env.unwrapped.examples[0]
    (result,) = run_episodes([env], agent, [Task(example.id, seed=0)], keep_trajectories=True)
    records = result.trajectory.records()
    assert result.outcome == "answered" and len(records) == 2
    restart = next(t["context"] for t in result.turns if t.get("context", {}).get("kind") == "restart")
    assert restart["text"] == "I searched the founder."
    # The second record's prompt is the fresh render of the restarted conversation: the prompt with the summary.
    game = env.unwrapped.game
    view = game.context_view
    assert records[1].prompt_ids == prompt_ids(tok, view.prompt, {"prompt_messages": view.prompt_messages}, chat=agent.chat)
    assert tok.decode(records[1].prompt_ids).count("I searched the founder.") == 1
    # The summary is the last generated turn of the first record: trained with the rest of it.
    assert tok.decode(records[0].segments[-1].token_ids).startswith("<summary>I searched the founder.")
    for record in records:
        assert record.loss_mask == [int(s.generated) for s in record.segments for _ in s.token_ids]
        check_generated(record, sampled)
    assert sampled == []
    assert result.turn_rewards[-1] == result.reward and len(result.turn_rewards) == sum(
        1 for r in records for s in r.segments if s.generated)


@pytest.fixture(scope="module")
def hermes_tokenizer():
    from searchgym.lm.chat_templates import install_chat_template
    from searchgym.lm.models import smollm2_tokenizer

    tok = smollm2_tokenizer()
    install_chat_template(tok, "hermes")
    return tok


def hermes(name, **arguments):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


@pytest.mark.parametrize("context,options", [("archive", {"keep_last": 1}), ("summarize", {"max_tokens": 1})])
def test_tool_records_equal_a_fresh_render_of_each_conversation(hermes_tokenizer, context, options):
    tok = hermes_tokenizer
    env = make_small("searchgym/SearchR1-v0", action_format="tools", max_turns=6, context=context, context_options=options)
    turns = iter([hermes("search", query="founder"), hermes("search", query="river"), "<summary>searched founder and river</summary>",
                  hermes("answer", answer="nobody")] if context == "summarize" else
                 [hermes("search", query="founder"), hermes("search", query="river"), hermes("search", query="city"), hermes("answer", answer="nobody")])
    agent = policy_agent(env, ScriptedLM(lambda prompt: next(turns), tok), max_new_tokens=64)
    observation, info = env.reset(options={"example_index": 0})
    conversations = [info["messages"]]
    while True:
        (action,) = agent.act([observation], [info])
        observation, _, terminated, truncated, info = env.step(action)
        if "context_rewrite" in info:
            conversations.append(info["messages"])
        if terminated or truncated:
            agent.observe_end(0, info)
            break
    record = agent.end_episode(0)
    records = record.records()
    assert len(records) == len(conversations) > 1
    assert all(r.render_mismatch is None for r in records) and not agent.render_mismatches
    for r, conversation in zip(records, conversations):
        fresh = tok.encode(render_chat(tok, conversation, info["tools"], generation_prompt=True), add_special_tokens=False)
        assert list(r.prompt_ids) == fresh  # each record starts from the render of its own conversation
        assert r.loss_mask == [int(s.generated) for s in r.segments for _ in s.token_ids]
    # The last record, through its final turn, is the fresh render of the last conversation.
    final = render_chat(tok, info["messages"], info["tools"], generation_prompt=False)
    assert tok.decode(records[-1].context_ids()) == final[: final.rindex("<|im_end|>") + len("<|im_end|>")]
