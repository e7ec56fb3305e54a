"""Training across context rewrites: an episode of several records is several rows, each
trained with its episode's advantage (or its turns' credit), and a tiny model trains through
a summarize policy."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.agents.trajectory import Trajectory  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training.args import Args  # noqa: E402
from searchgym.training.batch import FixedPass, collate  # noqa: E402
from searchgym.training.segments import segment_rows, segment_steps  # noqa: E402
from searchgym.training.trainer import Sample, Trainer, compute_advantages, sample_steps, training_samples  # noqa: E402


def record(prompt, *parts):
    """A record: ``parts`` alternate generated and observation ids."""
    t = Trajectory(tuple(prompt))
    for i, ids in enumerate(parts):
        if i % 2 == 0:
            t.add_generated(tuple(ids), (0.0,) * len(ids), "stop")
        else:
            t.add_observation(tuple(ids))
    return t


def long_and_split():
    """One episode as one long record, and the same turns as two records (a rewrite after turn 2)."""
    long = record((1, 2), (3, 4), (5,), (6, 7), (8,), (9, 10))
    first = record((1, 2), (3, 4), (5,), (6, 7))
    split = first.restarted((11, 12, 13))
    split.add_generated((9, 10), (0.0, 0.0), "stop")
    return long, split


def args(**changes):
    base = dict(model="x", algorithm="grpo", gamma=1.0, lam=1.0)
    base.update(changes)
    return SimpleNamespace(**{**vars(Args(model="x")), **base})


def generated_advantages(advantages, mask):
    return [round(float(a), 5) for a, m in zip(advantages.flatten(), mask.flatten()) if m]


@pytest.mark.parametrize("algorithm", ["grpo", "reinforce++", "ppo"])
@pytest.mark.parametrize("credit", ["episode", "turn"])
def test_every_row_of_an_episode_gets_what_one_long_record_would(algorithm, credit):
    long, split = long_and_split()
    other = record((1, 2), (3,), (5,), (9, 10))
    turn_rewards = (0.0, 0.25, 1.0)
    long_samples = [Sample(long, 1.25, 0, turn_rewards), Sample(other, 0.0, 0, (0.0, 0.0))]
    split_samples = [Sample(split, 1.25, 0, turn_rewards), Sample(other, 0.0, 0, (0.0, 0.0))]
    a = args(algorithm=algorithm, credit=credit, reinforce_baseline="group")
    out = []
    for samples in (long_samples, split_samples):
        rows, episodes = segment_rows(samples)
        batch = collate(rows)
        mask = batch.loss_mask
        values = torch.zeros(mask.shape) if algorithm == "ppo" else None  # a critic that knows nothing: GAE is the return
        fixed = FixedPass(None, None, values)
        steps = None
        if credit == "turn":
            steps = sample_steps(samples) if episodes is None else segment_steps(samples, episodes)
        advantages, _ = compute_advantages(a, torch.tensor([s.reward for s in samples]), [s.group for s in samples], mask, fixed,
                                           steps=steps, episodes=episodes)
        out.append((episodes, generated_advantages(advantages, mask)))
    (no_rows, long_adv), (episodes, split_adv) = out
    assert no_rows is None and episodes == [0, 0, 1]
    assert long_adv == split_adv  # the same generated tokens, in the same order, with the same advantages


def test_the_rows_are_the_records_and_every_trained_id_was_sampled():
    _, split = long_and_split()
    rows, episodes = segment_rows([Sample(split, 1.0, 0)])
    assert rows == split.records() and episodes == [0, 0]
    batch = collate(rows)
    for r, row in enumerate(rows):
        ids = row.context_ids()
        trained = [ids[j + 1] for j in range(len(ids) - 1) if batch.loss_mask[r, j]]
        assert trained == [t for s in row.segments if s.generated for t in s.token_ids]
    # A long record (no rewrite) stays one row: today's batch, bit for bit.
    long, _ = long_and_split()
    assert segment_rows([Sample(long, 1.0, 0)]) == ([long], None)


def test_a_tiny_model_trains_through_a_summarize_policy(tmp_path):
    options = {"corpus_options": SMALL_WORLD, "max_turns": 4, "context": "summarize", "context_options": {"max_tokens": 60}}
    trainer = Trainer(Args(
        model=str(tiny_model_folder()), env_options=options, out=str(tmp_path / "run"), total_steps=1, questions_per_step=2, n=2,
        num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=1, progress=False, tensorboard=False, seed=0,
        threads=1, credit="turn", algorithm="ppo",
    ))
    trainer.build()
    results, _ = trainer.rollout(0)
    assert all(len(r.trajectory.records()) >= 2 for r in results)
    assert all(any(t.get("context", {}).get("kind") == "restart" for t in r.turns) for r in results)
    stats = trainer.update(training_samples(results, n=2, grouped=False))
    assert stats["logprob_diff_max"] < 1e-3  # every row is what the engine sampled
    assert all(v is None or v == v for v in stats.values())
