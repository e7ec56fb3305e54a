"""Training with the vLLM rollout engine on this CPU: weights pushed after every update,
and the logprob check between the engine and the trainer."""

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training.args import Args  # noqa: E402
from searchgym.training.trainer import Trainer  # noqa: E402


@pytest.mark.parametrize("engine", ["vllm", "vllm-async"])
def test_vllm_rollouts_follow_the_updated_policy(engine, tmp_path, monkeypatch):
    """Both engines; vllm-async plays the rollouts with the async driver."""
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    args = Args(
        model=str(tiny_model_folder()), engine=engine, engine_options={"max_model_len": 2048},
        env_options={"corpus_options": SMALL_WORLD, "max_turns": 2}, out=str(tmp_path / "run"), total_steps=3,
        questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=3e-3, entropy_coef=0.05,
        save_every=3, progress=False, tensorboard=False, logprob_check_atol=2e-3,
    )
    import searchgym.training.trainer as trainer_module

    modes = []
    play = trainer_module.run_episodes
    monkeypatch.setattr(trainer_module, "run_episodes", lambda *a, **kw: modes.append(kw.get("mode")) or play(*a, **kw))
    trainer = Trainer(args)
    rows = trainer.train()
    assert modes == ["async" if engine == "vllm-async" else "rounds"] * 3
    assert [r["step"] for r in rows] == [1, 2, 3]
    # Every step's rollout was sampled by weights equal to the trainer's (checked to 2e-3 on every
    # generated token, else the run would have stopped), and the weights did move.
    assert all(r["logprob_diff_max"] < 2e-3 for r in rows)
    assert trainer.rollout_lm.weight_version == 3 and all(r["time_sync"] > 0 for r in rows)
    assert rows[0]["grad_norm"] > 0
    # The engine now generates exactly what the trained model generates.
    from searchgym.lm.hf import TransformersLM

    hf = TransformersLM(trainer.model, trainer.tokenizer)
    prompts = ["The city of Marrowgate", "What is the capital of France?"]
    ours = trainer.rollout_lm.generate(prompts, max_new_tokens=8, temperature=0)
    theirs = hf.generate(prompts, max_new_tokens=8, temperature=0)
    assert [g.token_ids for g in ours] == [g.token_ids for g in theirs]
