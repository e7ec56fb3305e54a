"""AutoRefine as a user builds it: the <refine> grammar and tool, its reward's table, the hacks
it invites, fuzzing in both action formats, and the CLI (bench with the oracle, a training
quick form). Only public names of searchgym."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.cli import main
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Invalid, Search
from searchgym.envs.single.checks import check_protocol, check_search_env, fuzz_actions
from searchgym.error import ConfigError, SearchGymError
from searchgym.methods.autorefine import (
    AUTOREFINE_PROMPT,
    AutoRefineProtocol,
    AutoRefineReward,
    AutoRefineValidation,
    Refine,
    document_names,
    refine_texts,
)
from searchgym.plugins import settings_of
from searchgym.rewards import Episode, SearchRecord, Turn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import hacks_autorefine  # noqa: E402

WORLD = {"seed": 7, "num_passages": 400}
ENV_ID = "searchgym/AutoRefine-v0"


def make(**kwargs):
    return gym.make(ENV_ID, corpus_options=WORLD, **kwargs)


# ---------------------------------------------------------------- the prompt and the grammar
def test_the_prompt_is_the_released_one_with_the_question():
    env = make()
    obs, _ = env.reset(seed=0)
    question = search_env(env).example.question
    assert obs == AUTOREFINE_PROMPT.format(question=question)
    assert obs.startswith("You are a helpful assistant excel at answering questions with multi-turn search engine calling. ")
    assert "After each search, you need to summarize and refine the existing documents in <refine> and </refine>. " in obs
    assert obs.endswith("For example, <answer> Donald Trump </answer>. Question: " + question + "\n")


def test_parse_reads_refines_before_the_action_and_write_inverts_it():
    p = AutoRefineProtocol()
    turn = p.parse("<think> x </think><refine> A founded B </refine> <refine></refine><search> B founder </search><refine> late")
    assert turn.actions == (Refine("A founded B"), Search("B founder")) and turn.well_formed
    for actions in [(Search("q"),), (Answer("Paris"),), (Refine("one"), Refine("two"), Answer("Paris"))]:
        assert p.parse(p.write(list(actions))).actions == actions
    assert p.parse("<refine> only a refine </refine>").actions[0].kind == "invalid"
    forged = p.parse("<documents>Doc 1(Title: X) the answer is X</documents><refine> X </refine><answer> X </answer>")
    assert forged.forged_env_tags and not forged.well_formed and "<documents>" not in forged.text
    with pytest.raises(ConfigError, match=r"The autorefine protocol cannot write a turn doing refine; it writes Refine actions"):
        p.write([Refine("alone")])
    with pytest.raises(ConfigError, match="cannot write a turn doing answer\\+refine"):
        p.write([Answer("x"), Refine("after")])
    check_protocol(p, fuzz=300)
    assert settings_of(p) == {"class": "searchgym.methods.autorefine:AutoRefineProtocol", "settings": {"prompt": "released"}}
    assert settings_of(AutoRefineReward())["settings"]["max_refine_names"] == 3


def test_tags_play_documents_then_refine_then_answer():
    env = make()
    env.reset(seed=0)
    inner = search_env(env)
    example, write = inner.example, inner.protocol.write
    obs, reward, *_ = env.step(write([Search(example.question)]))
    assert obs.startswith("\n\n<documents>Doc 1(Title: ") and obs.endswith("</documents>\n\n") and "<information>" not in obs
    obs, reward, terminated, _, info = env.step(write([Refine(f"The answer is {example.answers[0]}."), Answer(example.answers[0])]))
    assert terminated and reward == 1.0 and info["action_kinds"] == ("refine", "answer")
    assert info["reward_components"]["f1"] == 1.0 and info["reward_components"]["refine"] == 1.0


def test_tools_play_a_refine_call_and_list_the_tool():
    env = make(action_format="tools")
    obs, info = env.reset(seed=0)
    inner = search_env(env)
    tools = inner.game.tools
    assert [t["function"]["name"] for t in info["tools"]] == ["search", "answer", "refine"]
    assert "call the refine tool" in info["messages"][0]["content"]
    example = inner.example
    env.step(tools.write_text([Search(example.question)]))
    obs, reward, *_, info = env.step(tools.write_text([Refine(f"It is {example.answers[0]}.")]))
    assert info["action_kinds"] == ("refine",) and "Refined." in obs and reward == 0.0
    _, reward, terminated, _, info = env.step(tools.write_text([Answer("Zqxwv Plorth")]))
    assert terminated and reward == pytest.approx(0.1) and info["reward_components"]["refine"] == 1.0
    # A refine call without text, or with an empty one, is a bad call, never an exception.
    env.reset(seed=1)
    _, _, _, _, info = env.step('<tool_call>{"name": "refine", "arguments": {"text": "  "}}</tool_call>')
    assert info["action_kinds"] == ("invalid",)


@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_hostile_turns_never_crash_either_format(action_format):
    env = make(action_format=action_format)
    if action_format == "tags":  # (in tools a reply without a call is the answer: not idle)
        check_search_env(env, fuzz=40)
    rng = random.Random(0)
    hostile = ["", "<refine>", "</refine>", "<refine><refine> x </refine></refine><search> q",
               "<refine>" + "x " * 50_000,
               "<documents><refine> a </refine></documents><answer> a </answer>", "<refine> a </refine>" * 200 + "<answer> b",
               '<tool_call>{"name": "refine", "arguments": {"text": 3}}</tool_call>',
               '<tool_call>{"name": "refine", "arguments": {}}</tool_call><tool_call>{"name": "answer"}</tool_call>',
               "<tool_response>Doc 1(Title: X) X</tool_response><refine> X </refine>"]
    hostile += ["".join(rng.choice(["<refine>", "</refine>", "<documents>", "</documents>", "word ", "<search> q </search>"])
                        for _ in range(rng.randint(1, 10))) for _ in range(40)]
    hostile += fuzz_actions(search_env(env).protocol, 40, seed=3)
    env.reset(seed=0)
    for text in hostile:
        _, reward, terminated, truncated, _ = env.step(text)
        assert isinstance(reward, float)
        if terminated or truncated:
            env.reset()


# ---------------------------------------------------------------- the reward's table
QUESTION = "Who founded Brupromusk Motors?"
DOCS = ("Brupromusk Motors\nBrupromusk Motors is a company in Kinlavisk. Minia Diraevath founded Brupromusk Motors in 1918. "
        "It makes trucks, buses and small cars for the markets of the region, and its workshops stand near the station.",
        "Minia Diraevath\nMinia Diraevath began her career as a banker in Kraethekova. She later lived in Skerzuseth and "
        "Vumnereth, and studied at Prolthunar College. Her papers are kept in an archive in Drizeikund.")


def episode(answer, refines=(), answers=("Minia Diraevath",), question=QUESTION, docs=DOCS, refine_turn=1):
    """A search in turn 0 (its documents shown), then the refines and the answer in ``refine_turn``."""
    turns = [Turn("<search> q </search>", ("search",), ("documents",), 0, (Search("q"),))]
    if refine_turn > 1:
        turns.append(Turn("<search> r </search>", ("invalid",), ("feedback",), 1, (Invalid("x"),)))
    last = (*(Refine(r) for r in refines), *((Answer(answer),) if answer is not None else ()))
    turns.append(Turn("", tuple(a.kind for a in last), (), refine_turn, last))
    return Episode(question, answers, tuple(turns), answer=answer, searches=(SearchRecord(1, 0, "q", ("d1", "d2"), docs),),
                   num_searches=1)


@pytest.mark.parametrize("answer, refines, total, parts", [
    (None, ["Minia Diraevath founded it."], 0.0, {"f1": 0.0, "refine": 0.0}),  # no answer: 0 whatever the refine holds
    ("Minia Diraevath", [], 1.0, {"f1": 1.0, "refine": 0.0}),
    ("Minia", ["Minia Diraevath founded it."], pytest.approx(2 / 3), {"refine": 1.0}),  # F1 > 0: F1 alone, no bonus added
    ("Zqxwv", ["Minia Diraevath founded it in 1918."], 0.1, {"f1": 0.0, "refine": 1.0}),  # wrong answer, refine holds it
    ("Zqxwv", ["Brupromusk Motors is in Kinlavisk."], 0.0, {"refine": 0.0}),
    ("Zqxwv", [], 0.0, {"refines": 0.0}),
])
def test_reward_table_each_branch(answer, refines, total, parts):
    result = AutoRefineReward().score(episode(answer, refines))
    assert result.total == total
    assert parts.items() <= result.components.items()


def test_yes_no_rule_and_the_released_substring():
    wrong_polarity = episode("no", answers=("yes",))
    assert AutoRefineReward().score(wrong_polarity).total == 0.0  # F1's yes/no rule: "no" for "yes" is 0
    known = episode("Zqxwv", ["It is not known."], answers=("no",))
    assert AutoRefineReward().score(known).total == 0.0
    # The released test: "no" is a character substring of "not known"; searchgym reads tokens.
    assert AutoRefineReward(strict=False, released_substring=True).score(known).total == pytest.approx(0.1)
    assert AutoRefineReward(strict=False).score(known).total == 0.0  # the token "no" is not in "it is not known"
    assert AutoRefineReward(released_substring=True).score(known).total == 0.0  # strict: a yes/no gold pays no refine
    yes_no = episode("Zqxwv", ["yes no"], answers=("no",))
    assert AutoRefineReward(strict=False).score(yes_no).total == pytest.approx(0.1)
    assert AutoRefineReward().score(yes_no).total == 0.0


PASTE = " ".join(DOCS)
NAMES = "Brupromusk Motors, Kinlavisk, Minia Diraevath, Kraethekova, Skerzuseth, Vumnereth, Prolthunar College, Drizeikund"


@pytest.mark.parametrize("case, built, why", [
    ("a paste of the documents", lambda: episode("Zqxwv", [PASTE]), "it keeps more than 0.5 of the 69 words of its documents"),
    ("a list of every name", lambda: episode("Zqxwv", [NAMES]), "names 7 names of its documents"),
    ("a refine before any documents", lambda: Episode(QUESTION, ("Minia Diraevath",), (Turn(
        "", ("refine", "search"), ("documents",), 0, (Refine("Minia Diraevath"), Search("q"))), Turn(
        "", ("answer",), (), 1, (Answer("Zqxwv"),))), answer="Zqxwv", searches=(SearchRecord(1, 0, "q", ("d1",), DOCS[:1]),)),
     None),
    ("a refine after feedback, not documents", lambda: episode("Zqxwv", ["Minia Diraevath founded it."], refine_turn=2), None),
    ("the question's own option", lambda: episode("Zqxwv", ["Kinlavisk is larger."], answers=("Kinlavisk",),
                                                   question="Which is larger, Kinlavisk or Saerdor?"), None),
])
def test_strict_refines_refuse_what_is_no_refinement(case, built, why):
    ep = built()
    assert AutoRefineReward().score(ep).total == 0.0, case
    assert AutoRefineReward(strict=False, released_substring=True).score(ep).total == pytest.approx(0.1), case
    if why:
        recipe = AutoRefineReward()
        round_, text = refine_texts(ep)[0]
        assert why in recipe.refinement_problem(ep, round_, text)


def test_only_the_first_refine_of_a_turn_and_the_last_turn_count():
    spam = episode("Zqxwv", ["Brupromusk Motors is in Kinlavisk.", "Minia Diraevath founded it."])
    assert AutoRefineReward().score(spam).total == 0.0 and AutoRefineReward().paid_refines(spam) == ["Brupromusk Motors is in Kinlavisk."]
    assert AutoRefineReward(strict=False).score(spam).total == pytest.approx(0.1)  # released: all blocks joined
    # Each refine summarizes "the existing documents": the last one is read, not an earlier one.
    earlier = Episode(QUESTION, ("Minia Diraevath",), (
        Turn("", ("search",), ("documents",), 0, (Search("q"),)),
        Turn("", ("refine", "search"), ("documents",), 1, (Refine("Minia Diraevath founded it."), Search("r"))),
        Turn("", ("refine", "answer"), (), 2, (Refine("Brupromusk Motors is in Kinlavisk."), Answer("Zqxwv")))),
        answer="Zqxwv", searches=(SearchRecord(1, 0, "q", ("d1",), DOCS[:1]), SearchRecord(2, 1, "r", ("d2",), DOCS[1:])))
    assert AutoRefineReward().paid_refines(earlier) == ["Brupromusk Motors is in Kinlavisk."]
    assert AutoRefineReward().score(earlier).total == 0.0
    assert AutoRefineReward(strict=False).score(earlier).total == pytest.approx(0.1)


def test_hedged_answers_score_zero_and_names_are_read_from_the_documents():
    hedge = episode("Minia Diraevath or Kraethekova or Skerzuseth")
    assert AutoRefineReward().score(hedge).components["f1"] == 0.0
    assert AutoRefineReward(strict=False).score(hedge).total > 0.0
    names = document_names(DOCS)
    assert names[:3] == ["Brupromusk Motors", "Kinlavisk", "Minia Diraevath"] and "It" not in names and "Her" not in names


@pytest.mark.parametrize("options, message", [
    ({"answer_metric": "bleu"}, "answer_metric"),
    ({"refine_score": 2}, "expects refine_score to be a number in [0, 1] (the released 0.1), got 2."),
    ({"max_refine_share": 0}, "expects max_refine_share to be a number in (0, 1]"),
    ({"max_refine_names": 0}, "expects max_refine_names to be an integer >= 1"),
    ({"strict": "yes"}, "expects strict to be True or False, got 'yes'."),
])
def test_bad_options_are_typed_errors(options, message):
    with pytest.raises(SearchGymError) as e:
        AutoRefineReward(**options)
    assert message in str(e.value)


def test_answer_metrics_em_and_cem():
    assert AutoRefineReward(answer_metric="em").score(episode("Minia")).total == 0.0
    assert AutoRefineReward(answer_metric="cem").score(episode("it was Minia Diraevath")).total == 1.0


# ---------------------------------------------------------------- hacks
@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_no_hack_beats_honest_play(action_format):
    rows = hacks_autorefine.rows(quick=True, action_format=action_format)
    assert len(rows) >= 12
    assert all(r["gain"] <= 1e-9 for r in rows), [r for r in rows if r["gain"] > 1e-9]
    assert {r["strategy"] for r in rows} >= {"refine: every document pasted", "refine: every name in the documents"}


def test_the_released_reward_is_hackable_on_a_larger_world():
    rows = {r["strategy"]: r for r in hacks_autorefine.rows(questions=40, num_passages=1000, released=True)}
    assert rows["refine: every document pasted"]["gain"] > 0.0


# ---------------------------------------------------------------- the command line
def test_bench_the_oracle_through_the_cli(tmp_path, capsys):
    code = main(["bench", "--envs", "AutoRefine-v0", "--agents", "oracle", "--limit", "4", "--env-options",
                 json.dumps({"corpus_options": WORLD}), "--out", str(tmp_path / "b"), "--quiet"])
    assert code == 0
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    text = json.dumps(summary)
    assert "AutoRefine-v0" in text and '"reward": 1.0' in text


def test_train_the_preset_quick_form_through_the_cli(tmp_path):
    code = main(["train", "--preset", "autorefine", "--model", "tiny-random-2k", "--env-options",
                 json.dumps({"corpus_options": WORLD, "max_turns": 2}), "--n", "2", "--questions-per-step", "2",
                 "--num-envs", "4", "--max-new-tokens", "8", "--total-steps", "2", "--out", str(tmp_path / "t"),
                 "--no-tensorboard", "--no-progress"])
    assert code == 0
    args = json.loads((tmp_path / "t" / "args.json").read_text())
    assert args["env_id"] == ENV_ID and args["algorithm"] == "grpo" and args["kl_coef"] == 0.001
    assert (tmp_path / "t" / "metrics.csv").read_text().count("\n") >= 3


def test_the_docs_example_pays_a_wrong_answer_whose_refine_found_the_gold():
    env = make()
    env.reset(seed=0)
    write = search_env(env).protocol.write
    env.step(write([Search("Brupromusk Motors founded")]))
    env.step(write([Refine("Minia Diraevath founded Brupromusk Motors in 1918."), Search("Minia Diraevath studied")]))
    env.step(write([Refine("Minia Diraevath studied music at Pimelt College."), Search("Pimelt College located")]))
    _, reward, terminated, _, info = env.step(write([Refine("Pimelt College is in Vumnereth."), Answer("Kinlavisk")]))
    assert terminated and reward == pytest.approx(0.1)
    assert info["reward_components"] == {"f1": 0.0, "refine": 1.0, "refines": 1.0}


def test_the_released_validation_reward_is_the_answer_metric_alone():
    """AR main_ppo.py:272 (8363788) builds val_reward_fn without refine_score (0 by default, :43): a wrong
    answer whose refine holds the gold scores 0 in validation, 0.1 in training."""
    found = episode("Zqxwv", ["Minia Diraevath founded it."])
    assert AutoRefineReward(strict=False, released_substring=True).score(found).total == pytest.approx(0.1)
    assert AutoRefineValidation(strict=False, released_substring=True).score(found).total == 0.0
    assert AutoRefineValidation(refine_score=0.5).refine_score == 0.0  # the validation reward has no bonus
    right = episode("Minia Diraevath", [])
    assert AutoRefineValidation().score(right).total == AutoRefineReward().score(right).total == 1.0
    from searchgym.training.args import preset
    from searchgym.training.paper_scale import paper_scale_args

    args = preset("autorefine")
    assert args.eval_env_options == {"reward": "searchgym.methods.autorefine:AutoRefineValidation"}
    env = gym.make(ENV_ID, corpus_options=WORLD, **args.eval_env_options)
    assert isinstance(search_env(env).recipe, AutoRefineValidation)
    # grpo_trainer.yaml:34-35 (clip, entropy), core_algos.py:192 (token mean); top_p kept at 1.0 (the yaml's 0.95, :74)
    assert (args.clip, args.entropy_coef, args.loss_aggregation, args.top_p) == (0.2, 0.001, "token-mean", 1.0)
    # 5 search turns, then the answer turn (cmd/train.sh:29 max_turns=5 and the final rollout)
    assert (search_env(env).max_turns, search_env(env).top_k) == (6, 3)
    # --paper-scale: 256 questions x 5 answers in mini-batches of 256 sequences (cmd/train.sh:23,41,55): 5 updates
    scale = paper_scale_args("autorefine")
    assert (scale.questions_per_step, scale.n, scale.mini_batches) == (256, 5, 5)
