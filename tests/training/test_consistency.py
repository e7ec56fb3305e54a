"""The logprob consistency check: rollouts of the driver agree with the training model,
and a misaligned trajectory is caught."""

import pytest

torch = pytest.importorskip("torch")

from env_helpers import make_small  # noqa: E402
from searchgym.agents import Task, run_episodes  # noqa: E402
from searchgym.agents.lm_agents import policy_agent  # noqa: E402
from searchgym.agents.trajectory import Segment, Trajectory  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.hf import TransformersLM  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402
from searchgym.training.consistency import check_logprobs  # noqa: E402


@pytest.fixture(scope="module")
def rollouts():
    model = tiny_causal_lm()
    model.config.max_position_embeddings = 4096
    lm = TransformersLM(model, tiny_tokenizer())
    out = {}
    for temperature in (0.0, 0.7):
        envs = [make_small("searchgym/SearchR1-v0", max_turns=3) for _ in range(3)]
        agent = policy_agent(envs[0], lm, max_new_tokens=16, temperature=temperature, seed=1)
        tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:4]]
        out[temperature] = [r.trajectory for r in run_episodes(envs, agent, tasks, keep_trajectories=True)]
    return model, out


def test_multi_turn_rollouts_match_the_training_model(rollouts):
    model, out = rollouts
    for temperature, trajectories in out.items():
        assert any(not s.generated for t in trajectories for s in t.segments)  # observations are in there
        report = check_logprobs(model, trajectories, temperature=temperature, atol=1e-4)
        assert report.ok, str(report)
        assert report.num_tokens == sum(t.num_generated for t in trajectories)


def test_a_re_tokenized_or_misaligned_trajectory_is_caught(rollouts):
    model, out = rollouts
    good = out[0.0][0]
    # The first generated segment shifted by one token (an off-by-one in the record).
    segs = list(good.segments)
    first = segs[0]
    segs[0] = Segment(first.token_ids[1:] + (first.token_ids[0],), first.logprobs, True, first.finish_reason)
    report = check_logprobs(model, [Trajectory(good.prompt_ids, segs)], atol=1e-4)
    assert not report.ok and report.max_abs_diff > 0.1
    assert str(report).startswith("INCONSISTENT: ")
    with pytest.raises(ConfigError, match="found no generated token"):
        check_logprobs(model, [Trajectory(good.prompt_ids, [s for s in good.segments if not s.generated])])
