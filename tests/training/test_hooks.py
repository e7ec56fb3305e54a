"""Trainer hooks, written as a user would: a module of their own named by module:attr in
Args.hooks and ``searchgym train --hooks``; per-step schedules, group rewards, and the
errors of a bad or failing hook."""

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.error import ConfigError, HookError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training import Args, Trainer  # noqa: E402
from searchgym.training import trainer as trainer_module  # noqa: E402
from searchgym.training.hooks import TrainerHook  # noqa: E402

USER_MODULE = '''
"""A user's hooks: a turn curriculum, a group bonus, and hooks that fail."""
from searchgym.envs import search_env
from searchgym.training.hooks import TrainerHook

LOG = []


class Curriculum(TrainerHook):
    """A malformed turn costs 0.1 more at every step; records what each step saw."""

    def before_rollout(self, trainer, step):
        for env in trainer.envs:
            search_env(env).recipe.invalid_action_penalty = -0.1 * step
        LOG.append(("before_rollout", step))

    def group_rewards(self, results):
        LOG.append(("played", [(r.reward, r.num_invalid, r.turn_rewards) for r in results]))
        return None

    def on_step(self, trainer, step, stats):
        LOG.append(("on_step", step, trainer.step, stats["reward"]))


class FirstGetsABonus:  # no base class: any object with a hook method is a hook
    def group_rewards(self, results):
        return [r.reward + (1.0 if i == 0 else 0.0) for i, r in enumerate(results)]


def make_bonus():  # a factory
    return FirstGetsABonus()


class Boom(TrainerHook):
    def on_step(self, trainer, step, stats):
        raise ValueError("boom")


class WrongLength(TrainerHook):
    def group_rewards(self, results):
        return [1.0]


class NotAHook:
    pass
'''


@pytest.fixture
def hooks_module(tmp_path, monkeypatch):
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "user_hooks_b.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "user_hooks_b", raising=False)
    import user_hooks_b

    yield user_hooks_b
    sys.modules.pop("user_hooks_b", None)


def tiny_args(tmp_path, **changes):
    base = dict(
        model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD, "max_turns": 2}, out=str(tmp_path / "run"),
        total_steps=2, questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=1,
        progress=False, tensorboard=False, seed=0, threads=1,
    )
    base.update(changes)
    return Args(**base)


def test_a_step_hook_sees_every_step_and_its_schedule_reaches_the_rollout(tmp_path, hooks_module):
    rows = Trainer(tiny_args(tmp_path, hooks=["user_hooks_b:Curriculum"])).train()
    log = hooks_module.LOG
    assert [e[0] for e in log] == ["before_rollout", "played", "played", "on_step"] * 2
    assert log[0] == ("before_rollout", 0) and log[4] == ("before_rollout", 1)
    first, second = log[1][1] + log[2][1], log[5][1] + log[6][1]
    assert all(reward == 0 for reward, _, _ in first)  # step 0: malformed turns cost nothing
    assert any(invalid for _, invalid, _ in second)  # the tiny model writes malformed turns...
    for reward, invalid, turns in second:  # ...which cost 0.1 each at step 1, each on its own step
        assert reward == pytest.approx(-0.1 * invalid) and all(r in (0.0, pytest.approx(-0.1)) for r in turns)
    assert log[3] == ("on_step", 1, 1, rows[0]["reward"]) and log[7] == ("on_step", 2, 2, rows[1]["reward"])


@pytest.mark.parametrize("credit", ["episode", "turn"])
def test_a_group_hook_changes_the_rewards_that_are_trained_and_averaged(tmp_path, hooks_module, monkeypatch, credit):
    seen = []
    original = trainer_module.compute_advantages

    def spy(args, scores, groups, mask, fixed, *, steps=None):
        out = original(args, scores, groups, mask, fixed, steps=steps)
        seen.append((scores.tolist(), steps, out[0]))
        return out

    monkeypatch.setattr(trainer_module, "compute_advantages", spy)
    rows = Trainer(tiny_args(tmp_path, total_steps=1, hooks=["user_hooks_b:make_bonus"], credit=credit)).train()
    scores, steps, advantages = seen[0]
    assert scores == [1.0, 0.0, 1.0, 0.0]  # the tiny model earns 0; the first answer to each question got +1
    assert rows[0]["reward"] == 0.5
    assert bool(advantages.abs().any())
    if credit == "turn":  # the bonus is credited to each episode's last turn
        assert [row[-1][1] for row in steps] == [1.0, 0.0, 1.0, 0.0]


def test_hooks_run_from_the_command_line(tmp_path, hooks_module, monkeypatch):
    from searchgym.cli import main

    monkeypatch.chdir(tmp_path)
    code = main([
        "train", "--model", str(tiny_model_folder()), "--env-options", f'{{"corpus_options": {{"seed": {SMALL_WORLD["seed"]}, '
        f'"num_passages": {SMALL_WORLD["num_passages"]}}}, "max_turns": 2}}', "--out", str(tmp_path / "cli"),
        "--total-steps", "1", "--questions-per-step", "2", "--n", "2", "--num-envs", "4", "--max-new-tokens", "8",
        "--micro-batch-size", "2", "--no-progress", "--no-tensorboard", "--threads", "1", "--credit", "turn",
        "--hooks", "user_hooks_b:Curriculum", "user_hooks_b:FirstGetsABonus",
    ])
    assert code == 0
    assert [e[0] for e in hooks_module.LOG] == ["before_rollout", "played", "played", "on_step"]
    assert hooks_module.LOG[-1][3] == 0.5  # Curriculum's on_step saw the bonus FirstGetsABonus paid


def test_bad_hooks_are_refused_by_name_before_any_model_loads(tmp_path, hooks_module, monkeypatch):
    from searchgym.cli import main

    monkeypatch.setattr(trainer_module, "load_policy", lambda *a, **k: pytest.fail("a model was loaded"))
    cases = [
        ("user_hooks_b:Curriculum", r"Args\.hooks expects a list of module:attr strings such as \['my_hooks:Curriculum'\], got 'user_hooks_b:Curriculum'\."),
        (["Curriculum"], r"Args\.hooks expects module:attr strings such as my_hooks:Curriculum, got 'Curriculum'\."),
        # searchgym.plugins words the import failure; it names the hook and quotes the import's error.
        (["no_such_hooks_b:Hook"], r"Cannot import .*trainer hook 'no_such_hooks_b:Hook' \(ModuleNotFoundError: No module named 'no_such_hooks_b'\).*"),
        (["user_hooks_b:Missing"], r"The trainer hook 'user_hooks_b:Missing' names nothing: module 'user_hooks_b' has no attribute 'Missing'\."),
        (["user_hooks_b:NotAHook"], (
            r"The trainer hook 'user_hooks_b:NotAHook' expects a class or object with a method before_rollout, group_rewards, "
            r"keep_group, more_rollouts, step_metrics, on_step, got user_hooks_b:NotAHook, which has none of them \(subclass searchgym\.training\.hooks\.TrainerHook\)\."
        )),
    ]
    for hooks, message in cases:
        with pytest.raises(ConfigError, match=f"^{message}$"):
            Trainer(tiny_args(tmp_path, hooks=hooks))
    assert main(["train", "--hooks", "no_such_hooks_b:Hook", "--out", str(tmp_path / "x")]) == 2
    assert main(["train", "--credit", "turns", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_a_hook_that_fails_stops_the_run_naming_it(tmp_path, hooks_module):
    with pytest.raises(HookError, match=r"^Step 1: the trainer hook 'user_hooks_b:Boom' failed in on_step: ValueError: boom$") as e:
        Trainer(tiny_args(tmp_path / "boom", hooks=["user_hooks_b:Boom"])).train()
    assert e.value.hook == "user_hooks_b:Boom"
    with pytest.raises(HookError, match=(
        r"^Step 1: the trainer hook 'user_hooks_b:WrongLength' group_rewards expects a list of 2 numbers \(one per episode of "
        r"the question\) or None, got \[1\.0\]\.$"
    )):
        Trainer(tiny_args(tmp_path / "wrong", hooks=["user_hooks_b:WrongLength"])).train()


def test_the_base_class_does_nothing():
    hook = TrainerHook()
    assert hook.group_rewards([]) is None and hook.before_rollout(None, 0) is None and hook.on_step(None, 1, {}) is None


# ---------------------------------------------------------------- DAPO's dynamic sampling (docs/extending.md's my_dapo.py)
def docs_file(name: str) -> str:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    (code,) = [c for c in re.findall(r"```python\n(.*?)```", text, flags=re.S) if c.startswith(f"# {name}\n")]
    return code


VARIED = '''
from searchgym.training import TrainerHook

GROUPS = []


class EveryOtherVaries(TrainerHook):
    """The 1st, 3rd, ... question of a run gets rewards 1, 0, ...; the others keep the tiny model's 0s."""

    def group_rewards(self, results):
        GROUPS.append([r.example_id for r in results])
        return [float(i == 0) for i in range(len(results))] if len(GROUPS) % 2 == 1 else None


class Undecided(TrainerHook):
    def keep_group(self, results):
        return "yes"


class Clash(TrainerHook):
    columns = ("reward",)
'''


@pytest.fixture
def dapo_module(tmp_path, monkeypatch):
    folder = tmp_path / "dapo"
    folder.mkdir()
    (folder / "my_dapo.py").write_text(docs_file("my_dapo.py"))
    (folder / "varied_b.py").write_text(VARIED)
    monkeypatch.syspath_prepend(str(folder))
    for name in ("my_dapo", "varied_b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import my_dapo
    import varied_b

    yield my_dapo, varied_b
    for name in ("my_dapo", "varied_b"):
        sys.modules.pop(name, None)


def test_dynamic_sampling_drops_uniform_groups_draws_more_and_writes_its_columns(tmp_path, dapo_module, monkeypatch):
    import csv

    seen = []
    original = trainer_module.compute_advantages

    def spy(args, scores, groups, mask, fixed, *, steps=None):
        seen.append((scores.tolist(), list(groups)))
        return original(args, scores, groups, mask, fixed, steps=steps)

    monkeypatch.setattr(trainer_module, "compute_advantages", spy)
    trainer = Trainer(tiny_args(tmp_path, algorithm="grpo", total_steps=1, hooks=["varied_b:EveryOtherVaries", "my_dapo:DynamicSampling"]))
    rows = trainer.train()
    # Batch 1: question 1 varies (kept), question 2 does not (dropped): 1 of 2 kept, so a second batch of 2 questions
    # is drawn; question 3 kept, question 4 dropped: the batch is full.
    _, varied = dapo_module
    assert len(varied.GROUPS) == 4 and len({tuple(g) for g in varied.GROUPS}) >= 3  # new questions were drawn
    assert trainer.generation_batches == 2 and trainer.dropped_by == {"my_dapo:DynamicSampling": 2}
    assert seen == [([1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1])]  # only the kept groups were trained
    row = rows[0]
    assert row["episodes"] == 8 and row["dropped"] == 4 and row["dapo_kept_groups"] == 2 and row["dapo_gen_batches"] == 2
    with open(tmp_path / "run" / "metrics.csv", newline="") as f:
        (written,) = list(csv.DictReader(f))
    assert written["dapo_kept_groups"] == "2" and written["dapo_gen_batches"] == "2" and written["dropped"] == "4"
    assert written["loss"] != ""


def test_a_step_whose_every_group_is_dropped_is_skipped_and_says_so(tmp_path, dapo_module, capsys):
    # The tiny model earns 0 everywhere: every group is uniform, 3 generation batches, nothing kept.
    rows = Trainer(tiny_args(tmp_path, algorithm="grpo", total_steps=2, hooks=["my_dapo:DynamicSampling"])).train()
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["episodes"] == 12 and row["dropped"] == 12 and row["dapo_gen_batches"] == 3 and row["dapo_kept_groups"] == 0
        assert "loss" not in row
    err = capsys.readouterr().err
    assert (
        "step 1: skipped: the trainer hooks' keep_group dropped every group of the 6 questions played in 3 generation batches "
        "(dropped by 'my_dapo:DynamicSampling' (6 groups)), so the step trains nothing; no update was made and its metrics "
        "row has no loss."
    ) in err
    assert "step 2: skipped:" in err
    assert (tmp_path / "run" / "final").is_dir()  # the run finished


def test_bad_dynamic_sampling_hooks_are_refused_by_name(tmp_path, dapo_module):
    with pytest.raises(ConfigError, match=r"^The trainer hook 'varied_b:Clash' declares the column 'reward', a built-in metrics\.csv column"):
        Trainer(tiny_args(tmp_path, hooks=["varied_b:Clash"]))
    with pytest.raises(HookError, match=r"^Step 1: the trainer hook 'varied_b:Undecided' keep_group expects True .* got 'yes'\.$"):
        Trainer(tiny_args(tmp_path / "u", hooks=["varied_b:Undecided"])).train()
