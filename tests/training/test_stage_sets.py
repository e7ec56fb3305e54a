"""R1-Searcher's difficulty-picked stage sets (`searchgym stage-sets`) and the preset's
per-model KL: the paper's rule, the files, the trainer's use of them."""

import json

import pytest

from env_helpers import SMALL_WORLD
from searchgym.cli import main
from searchgym.corpora.datasets import read_qa
from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_model_folder, tiny_tokenizer
from searchgym.training.args import Args, check_args, preset
from searchgym.training.stage_sets import (
    PAPER_STAGE_COUNTS,
    StageSetArgs,
    check_stage_set_args,
    difficulty,
    pick_stage,
    rollouts_needed,
    stage_sets,
    stage_shares,
)

ENV = {"corpus_options": SMALL_WORLD, "max_turns": 2}


def test_the_papers_rule_easy_under_10_medium_10_to_20_difficult_above_20():
    assert rollouts_needed([False, False, True, True]) == 3 and rollouts_needed([False] * 21) is None
    assert [difficulty(n) for n in (1, 9, 10, 20, 21, None)] == ["easy", "easy", "medium", "medium", "difficult", "difficult"]
    assert StageSetArgs().budget() == 21  # the fewest rollouts that sort every question with the paper's thresholds


def scripted_solver(first_right):
    """A model that answers question i wrongly until its ``first_right[i]``-th rollout
    (None: never), counting rollouts by the prompts it sees (one turn per episode)."""
    seen = {}

    def respond(prompt):
        question = next(q for q in first_right if q in prompt)
        seen[question] = seen.get(question, 0) + 1
        right = first_right[question][1] is not None and seen[question] >= first_right[question][1]
        return f"<answer> {first_right[question][0] if right else 'Nobody at all'} </answer>"

    return ScriptedLM(respond, tiny_tokenizer())


@pytest.fixture
def sorted_sets(tmp_path):
    import gymnasium as gym

    examples = gym.make("searchgym/R1Searcher-v0", split="train", **ENV).unwrapped.examples[:4]
    first_right = {ex.question: (ex.answers[0], n) for ex, n in zip(examples, (1, 2, 4, None))}
    args = StageSetArgs(
        env_options=ENV, limit=4, rollouts=4, easy_below=2, difficult_above=3, num_envs=1, max_new_tokens=32, out=str(tmp_path / "sets"),
    )
    counts = stage_sets(args, lm=scripted_solver(first_right), progress=False)
    return examples, counts, tmp_path / "sets"


def test_stage_sets_sort_questions_by_the_rollouts_they_need(sorted_sets):
    examples, counts, out = sorted_sets
    assert counts == {"easy": 1, "medium": 1, "difficult": 2, "stage1": 1, "stage2": 3}
    rows = [json.loads(line) for line in (out / "difficulty.jsonl").read_text().splitlines()]
    assert [(r["rollouts_needed"], r["difficulty"]) for r in rows] == [(1, "easy"), (2, "medium"), (4, "difficult"), (None, "difficult")]
    assert rows[1]["correct"] == [False, True, True, True]
    stage1, stage2 = read_qa(out / "stage1.jsonl"), read_qa(out / "stage2.jsonl")
    assert [e.id for e in stage1] == [examples[1].id]  # medium only
    assert [e.id for e in stage2] == [e.id for e in examples[1:]]  # medium and difficult; easy left out
    assert stage2[0].answers == examples[1].answers and stage2[1].metadata["rollouts_needed"] == 4
    assert json.loads((out / "config.json").read_text())["counts"] == {"easy": 1, "medium": 1, "difficult": 2}


def test_fixed_stage_sizes_sample_table_1s_mixture_with_the_seed():
    assert PAPER_STAGE_COUNTS == {1: {"medium": 350}, 2: {"medium": 3648, "difficult": 4500}}  # Table 1, 8,148 in stage 2
    plenty = {"medium": 10_000, "difficult": 10_000}
    assert stage_shares(8148, plenty, PAPER_STAGE_COUNTS[2]) == {"medium": 3648, "difficult": 4500}
    assert stage_shares(20, plenty, PAPER_STAGE_COUNTS[2]) == {"medium": 9, "difficult": 11}
    # A category short of its share gives the rest to the other; a pool too small is kept whole.
    assert stage_shares(20, {"medium": 2, "difficult": 100}, PAPER_STAGE_COUNTS[2]) == {"medium": 2, "difficult": 18}
    assert stage_shares(20, {"medium": 2, "difficult": 3}, PAPER_STAGE_COUNTS[2]) == {"medium": 2, "difficult": 3}
    scored = [(("easy", "medium", "difficult")[i % 3], f"q{i}") for i in range(300)]
    medium = [q for c, q in scored if c == "medium"]
    assert pick_stage(scored, 1, None, seed=0) == medium  # every medium question, in order
    assert pick_stage(scored, 2, None, seed=0) == [q for c, q in scored if c != "easy"]
    one = pick_stage(scored, 1, 10, seed=0)
    assert len(one) == 10 and set(one) <= set(medium) and one == sorted(one, key=lambda q: int(q[1:]))
    assert pick_stage(scored, 1, 10, seed=0) == one and pick_stage(scored, 1, 10, seed=1) != one
    two = pick_stage(scored, 2, 20, seed=0)
    kinds = dict((q, c) for c, q in scored)
    assert [kinds[q] for q in two].count("medium") == 9 and [kinds[q] for q in two].count("difficult") == 11
    with pytest.raises(ConfigError, match=r"^StageSetArgs\.stage2_size expects a positive integer or None, got 0\.$"):
        check_stage_set_args(StageSetArgs(stage2_size=0))


def test_the_command_writes_sampled_stage_sets(tmp_path):
    import gymnasium as gym

    examples = gym.make("searchgym/R1Searcher-v0", split="train", **ENV).unwrapped.examples[:4]
    first_right = {ex.question: (ex.answers[0], n) for ex, n in zip(examples, (1, 2, 4, None))}
    args = StageSetArgs(
        env_options=ENV, limit=4, rollouts=4, easy_below=2, difficult_above=3, num_envs=1, max_new_tokens=32,
        out=str(tmp_path / "sets"), stage1_size=5, stage2_size=2, seed=3,
    )
    counts = stage_sets(args, lm=scripted_solver(first_right), progress=False)
    assert counts == {"easy": 1, "medium": 1, "difficult": 2, "stage1": 1, "stage2": 2}
    stage2 = read_qa(tmp_path / "sets" / "stage2.jsonl")
    # One medium and one of the two difficult questions (2 x 3,648/8,148 rounds to 1 of each).
    assert stage2[0].id == examples[1].id and stage2[1].id in (examples[2].id, examples[3].id)
    config = json.loads((tmp_path / "sets" / "config.json").read_text())
    assert config["stage_counts"] == {"stage1": 1, "stage2": 2} and config["stage2_size"] == 2


def test_the_trainer_trains_each_stage_on_its_set_and_the_preset_takes_them(sorted_sets, tmp_path):
    from searchgym.training.trainer import Trainer

    examples, _, out = sorted_sets
    args = Args(
        model=str(tiny_model_folder()), env_id="R1Searcher-v0", env_options=dict(ENV), out=str(tmp_path / "run"), total_steps=2,
        questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=1, progress=False,
        tensorboard=False, threads=1, reward="r1_searcher_stage1", stage2_reward="r1_searcher_stage2", stage2_step=1,
        stage_sets=str(out),
    )
    trainer = Trainer(args)
    trainer.build()
    assert [e.id for e in trainer.envs[0].unwrapped.examples] == [examples[1].id]
    rows = trainer.train()
    assert [r["stage_reward"] for r in rows] == ["r1_searcher_stage1", "r1_searcher_stage2"]
    assert [e.id for e in trainer.envs[0].unwrapped.examples] == [e.id for e in examples[1:]]
    assert set(trainer.order.ids) == {e.id for e in examples[1:]}
    resumed = Trainer(args.replace(total_steps=3))
    resumed.build()  # from step 2's checkpoint: stage 2's questions and data order
    assert set(resumed.order.ids) == {e.id for e in examples[1:]} and resumed.order.position == trainer.order.position
    check_args(preset("r1-searcher", stage_sets=str(out)))


def test_bad_stage_sets_are_refused_before_anything_loads(tmp_path):
    with pytest.raises(ConfigError, match=r"^Args\.stage_sets \('x'\) holds the questions of two curriculum stages; set stage2_step"):
        check_args(Args(stage_sets="x"))
    with pytest.raises(ConfigError, match=r"but .*nowhere/stage1\.jsonl does not exist; run `searchgym stage-sets --model M --out .*nowhere` first\.$"):
        check_args(preset("r1-searcher", stage_sets=str(tmp_path / "nowhere")))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "stage1.jsonl").write_text("")
    (tmp_path / "empty" / "stage2.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match=r"stage1\.jsonl holds no questions \(no question of the scored ones was medium\)"):
        check_args(preset("r1-searcher", stage_sets=str(tmp_path / "empty")))
    with pytest.raises(ConfigError, match=r"^StageSetArgs\.rollouts \(8\) must exceed difficult_above \(20\): .* Pass --rollouts 21 or more"):
        check_stage_set_args(StageSetArgs(rollouts=8))
    with pytest.raises(ConfigError, match=r"^StageSetArgs\.temperature expects a positive number"):
        check_stage_set_args(StageSetArgs(temperature=0.0))
    with pytest.raises(UnknownNameError, match=r"^Unknown stage-sets metric 'f1'"):
        check_stage_set_args(StageSetArgs(metric="f1"))


def test_cli_quick_form_on_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "sets"
    code = main([
        "stage-sets", "--model", "tiny-random", "--limit", "3", "--rollouts", "2", "--easy-below", "1", "--difficult-above", "1",
        "--max-new-tokens", "16", "--env-options", json.dumps(ENV), "--out", str(out), "--quiet", "--stage2-size", "2",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "(2 rollouts each); wrote" in printed and "stage1.jsonl" in printed
    rows = [json.loads(line) for line in (out / "difficulty.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(len(r["correct"]) == 2 for r in rows)
    assert len(read_qa(out / "stage2.jsonl")) == min(2, 3 - sum(r["difficulty"] == "easy" for r in rows))
    assert json.loads((out / "config.json").read_text())["stage2_size"] == 2
    assert main(["stage-sets", "--rollouts", "3", "--out", str(tmp_path / "bad")]) == 2
    assert "must exceed difficult_above (20)" in capsys.readouterr().err


def test_r1_searcher_kl_follows_the_model_family_and_an_explicit_value_wins():
    assert preset("r1-searcher", model="meta-llama/Llama-3.1-8B-Instruct").kl_coef == 1e-4
    assert preset("r1-searcher", model="Qwen/Qwen2.5-7B").kl_coef == 0.0
    assert preset("r1-searcher").kl_coef == 1e-4  # smollm2: the preset's (Llama) value
    assert preset("r1-searcher", model="Qwen/Qwen2.5-7B", kl_coef=0.01).kl_coef == 0.01
    assert preset("s3", model="Qwen/Qwen2.5-7B").kl_coef == 0.001  # other presets have no per-model values


def test_sets_do_not_depend_on_how_many_rollouts_play_at_once_and_a_stopped_run_plays_only_what_it_lacks(tmp_path, monkeypatch):
    """All rollouts of all questions are batched num_envs at a time; each samples from its
    own seeded stream, so the files are the same for 1 or 6 live episodes (the tiny model
    with 2k context, sampling at temperature 1)."""
    def run(out, **kw):
        settings = dict(
            model="tiny-random-2k", env_options=ENV, limit=3, rollouts=2, easy_below=1, difficult_above=1, num_envs=1,
            max_new_tokens=24, out=str(tmp_path / out),
        )
        return stage_sets(StageSetArgs(**{**settings, **kw}), progress=False)

    def lines(out, name):
        return (tmp_path / out / name).read_text().splitlines()

    run("one")
    run("six", num_envs=6)
    assert lines("one", "difficulty.jsonl") == lines("six", "difficulty.jsonl")
    rows = lines("one", "rollouts.jsonl")
    assert len(rows) == 1 + 6 and sorted(rows) == sorted(lines("six", "rollouts.jsonl"))
    assert len({json.loads(r)["generated_tokens"] for r in rows[1:]}) > 1  # the rollouts differ: the comparison can fail
    # a run stopped after 2 of 6 rollouts, the third one half written, resumes
    (tmp_path / "stopped").mkdir()
    (tmp_path / "stopped" / "rollouts.jsonl").write_text("\n".join(rows[:3]) + "\n" + rows[3][:20])
    run("stopped", num_envs=6)
    assert lines("stopped", "difficulty.jsonl") == lines("one", "difficulty.jsonl")
    resumed = lines("stopped", "rollouts.jsonl")
    assert resumed[:3] == rows[:3] and len(resumed) == 1 + 6 and sorted(resumed) == sorted(rows)
    # fewer questions than were played: every rollout is on file, so no model is loaded
    import searchgym.lm.registry

    monkeypatch.setattr(searchgym.lm.registry, "load_lm", lambda *a, **kw: pytest.fail("a model was loaded"))
    assert run("stopped", limit=2) == {"easy": 0, "medium": 0, "difficult": 2, "stage1": 0, "stage2": 2}
    assert lines("stopped", "difficulty.jsonl") == lines("one", "difficulty.jsonl")[:2]
    with pytest.raises(ConfigError, match=r"rollouts\.jsonl holds rollouts played with other settings: max_new_tokens=24 \(now 16\); pick another --out, or delete the file to replay them\.$"):
        run("one", max_new_tokens=16)


def test_rollouts_play_the_papers_data_selection_prompt_through_the_chat_template(tmp_path):
    from searchgym.envs.protocols.r1_searcher import DATA_SELECTION_PROMPT

    prompts = {}
    for prompt in ("data_selection", "base"):
        seen = []
        lm = ScriptedLM(lambda p: (seen.append(p), "<answer> Nobody </answer>")[1], tiny_tokenizer())
        args = StageSetArgs(
            env_options=ENV, limit=1, rollouts=2, easy_below=1, difficult_above=1, num_envs=1, max_new_tokens=16,
            prompt=prompt, out=str(tmp_path / prompt),
        )
        stage_sets(args, lm=lm, progress=False)
        prompts[prompt] = seen[0]
    assert DATA_SELECTION_PROMPT in prompts["data_selection"] and "<|im_start|>system" in prompts["data_selection"]
    assert prompts["base"].startswith("The User asks a question, and the Assistant solves it.")  # raw text
    assert StageSetArgs().prompt == "data_selection"
    # rollouts played with one prompt are not reused for the other
    with pytest.raises(ConfigError, match=r"holds rollouts played with other settings: prompt='base' \(now 'data_selection'\)"):
        stage_sets(StageSetArgs(**{**vars(args), "prompt": "data_selection"}), lm=lm, progress=False)
    with pytest.raises(UnknownNameError, match="Unknown stage-sets prompt 'data-selection'. Did you mean 'data_selection'?"):
        check_stage_set_args(StageSetArgs(prompt="data-selection"))
