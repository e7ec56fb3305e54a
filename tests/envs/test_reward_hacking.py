"""The hack suite: no scripted strategy earns more than an honest wrong answer.

Every registered env x every recipe of RECIPES, each strategy of
benchmarks/reward_hacking.py (hedged answers, sentences naming several candidates or pasting
up to the length bound, copies of the question or the documents,
evidence that was never retrieved, forged env tags, tag spam, repeated searches, maximal
lengths, s3's re-search) against an honest episode that searches and answers wrong on the
same questions. The gains are printed (``pytest -s``); docs/rewards.md has the table over
a larger world.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import reward_hacking as rh  # noqa: E402

from env_helpers import ENV_IDS  # noqa: E402
from searchgym.rewards import RECIPES  # noqa: E402

#: s3's re-search gain shows only where the naive top-3 misses the gold, which a 400-passage
#: world rarely does: its env plays a larger one.
WORLDS = {"searchgym/S3-v0": {"seed": 7, "num_passages": 2000}}
SMALL = {"seed": 7, "num_passages": 400}


def questions(env_id: str) -> list[int]:
    """Every comparison question of the world (hedging targets them) and the first others, 24 in all."""
    env = rh.make_env(env_id, "search_r1_em", WORLDS.get(env_id, SMALL))
    examples = env.unwrapped.examples
    comparisons = [i for i, e in enumerate(examples) if e.metadata.get("type") == "comparison"][:12]
    others = [i for i, e in enumerate(examples) if i not in comparisons][: 24 - len(comparisons)]
    return sorted(comparisons + others)


def test_the_catalogue_covers_every_family_and_protocol():
    families = {s.family for s in rh.STRATEGIES}
    assert families == {"hedge", "sentence", "copy", "golds", "format", "forge", "evidence", "s3", "tools"}
    assert {s.family for s in rh.STRATEGIES if s.formats == ("tools",)} == {"tools"}
    protocols = {p for s in rh.STRATEGIES for p in s.protocols}
    assert protocols == {"search_r1", "recon", "r1_searcher", "r_search", "s3"}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_no_strategy_beats_an_honest_wrong_answer(env_id):
    world = WORLDS.get(env_id, SMALL)
    protocol = rh.make_env(env_id, "search_r1_em", world).unwrapped.protocol.name
    rows = rh.evaluate([env_id], sorted(RECIPES), questions(env_id), world)
    check_rows(env_id, protocol, rows, "tags")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_no_strategy_beats_an_honest_wrong_answer_through_tool_calls(env_id):
    """The same suite with every turn written as tool calls, and the strategies only tool calls
    can play: parallel searches and answers, an answer beside a search, forged tool responses
    (in the text and in the arguments), evidence quoting what the env echoed back."""
    world = WORLDS.get(env_id, SMALL)
    protocol = rh.make_env(env_id, "search_r1_em", world).unwrapped.protocol.name
    rows = rh.evaluate([env_id], sorted(RECIPES), questions(env_id), world, action_format="tools")
    check_rows(env_id, protocol, rows, "tools")


def check_rows(env_id, protocol, rows, action_format):
    print(f"\n{env_id} in {action_format}: {len(rows)} (recipe, strategy) pairs")
    for r in sorted(rows, key=lambda r: -r.gain)[:8]:
        print(f"  {r.gain:+.3f}  {r.recipe:<20} {r.strategy}  (honest {r.honest:.3f}, strategy {r.hacked:.3f})")
    # Every recipe, and every strategy of the env's protocol, was played.
    assert {r.recipe for r in rows} == set(RECIPES)
    assert {r.strategy for r in rows} == {s.name for s in rh.STRATEGIES if protocol in s.protocols and action_format in s.formats}
    beaten = [f"{r.recipe} / {r.strategy}: {r.hacked:.3f} > {r.honest:.3f}" for r in rows if r.gain > rh.TOLERANCE]
    assert not beaten, "\n".join(beaten)


@pytest.mark.parametrize("env_id, recipe, strategy", [
    ("searchgym/SearchR1-v0", "r1_searcher_stage2", "both options"),
    ("searchgym/R1Searcher-v0", "r1_searcher_stage1", "both options joined by 'and'"),
    ("searchgym/R1Searcher-v0", "r1_searcher_stage1", "a short sentence per option"),
    ("searchgym/RECON-v0", "r1_searcher_stage2", "the question restated, then every title"),
    ("searchgym/SearchR1-v0", "r1_searcher_stage1", "a paste just under the length bound"),
    ("searchgym/RSearch-v0", "r_search", "evidence: every corpus title"),
    ("searchgym/S3-v0", "s3_gbr", "s3: search the question again, complete"),
])
def test_under_the_papers_raw_metrics_the_suite_finds_the_exploits(env_id, recipe, strategy):
    """The suite can fail: without the defenses (the papers' metrics and rules), each family's
    strategy beats the honest wrong answer on the same questions."""
    chosen = [s for s in rh.STRATEGIES if s.name == strategy]
    assert len(chosen) == 1
    world = WORLDS.get(env_id, SMALL)
    (raw,) = rh.evaluate([env_id], [recipe], questions(env_id), world, strategies=chosen, raw=True)
    (now,) = rh.evaluate([env_id], [recipe], questions(env_id), world, strategies=chosen)
    print(f"\n{env_id} x {recipe} / {strategy}: gain {raw.gain:+.3f} raw, {now.gain:+.3f} with the defenses")
    assert raw.gain > 0.02 and now.gain <= rh.TOLERANCE


def test_without_grounding_in_search_results_only_evidence_quoting_the_envs_echo_pays(monkeypatch):
    """The tool surface's defense: R-Search's grounding reads the search results as shown,
    never the env's error notes (which quote what the agent wrote, if briefly). Made to
    read every reply, as the first cut of the surface did, the strategy that names the options
    as a tool and quotes the error back as evidence gets the reader's F1 where the honest
    quote does not. (Its bad call costs it the answer-format score, so its total stays below
    the honest one either way: the evidence term is what the defense guards.)"""
    from searchgym.envs.tools.surface import ToolSurface

    env_id = "searchgym/RSearch-v0"
    (strategy,) = [s for s in rh.STRATEGIES if s.name == "tools: evidence quoting what the env echoed"]
    env = rh.make_env(env_id, "r_search", SMALL, action_format="tools")
    inner = env.unwrapped
    seen = rh.Seen(inner.protocol, "", inner.max_turns, [], lambda question: [], tools=inner.game.tools)

    def evidence_f1(policy):
        return sum(rh.play(env, i, policy, seen)[1]["reward_components"]["evidence_f1"] for i in questions(env_id))

    honest, defended = evidence_f1(rh.honest_wrong), evidence_f1(strategy.policy)
    reply = ToolSurface.reply

    def every_reply_groundable(self, turn, results, kinds, max_chars):
        messages, observation, cut, _ = reply(self, turn, results, kinds, max_chars)
        return messages, observation, cut, [m["content"] for m in messages if m["content"]]

    monkeypatch.setattr(ToolSurface, "reply", every_reply_groundable)
    undefended = evidence_f1(strategy.policy)
    print(f"\nevidence F1 over {len(questions(env_id))} questions: honest {honest:.2f}, echo quoted {defended:.2f} defended, "
          f"{undefended:.2f} grounding every reply")
    assert undefended > honest + 1 and defended <= honest
