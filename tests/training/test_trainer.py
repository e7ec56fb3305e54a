"""The RL trainer on tiny random models: masks, one-step learning direction, resume,
failure stops, LoRA, curricula and frozen models."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.agents.trajectory import Trajectory  # noqa: E402
from searchgym.error import ConfigError, SearchGymError, TrainingError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training import checkpoint as ckpt  # noqa: E402
from searchgym.training.args import Args, check_args, field_docs, preset  # noqa: E402
from searchgym.training.batch import collate, forward_logprobs  # noqa: E402
from searchgym.training.metrics import MetricsLog  # noqa: E402
from searchgym.training.data import TimedRetriever  # noqa: E402
from searchgym.training.trainer import Sample, Trainer, training_samples  # noqa: E402

SMALL = {"corpus_options": SMALL_WORLD, "max_turns": 2}


def tiny_args(tmp_path, **changes):
    base = dict(
        model=str(tiny_model_folder()), env_options=dict(SMALL), out=str(tmp_path / "run"), total_steps=2,
        questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=1,
        progress=False, tensorboard=False, seed=0, threads=1,
    )
    base.update(changes)
    return Args(**base)


def built(tmp_path, **changes):
    trainer = Trainer(tiny_args(tmp_path, **changes))
    trainer.build()
    return trainer


def sampled(trainer, prompt, response, observation=()):
    """A trajectory whose generated segment carries the model's own logprobs (old = current)."""
    t = Trajectory(tuple(prompt))
    with torch.no_grad():
        ids = torch.tensor([[*prompt, *response]], device=trainer.device)
        logp = torch.log_softmax(trainer.model(input_ids=ids).logits[0, :-1].float(), -1)
        lps = [float(logp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(response)]
    t.add_generated(tuple(response), tuple(lps), "stop")
    t.add_observation(tuple(observation))
    return t


def result(trajectory, reward, group):
    return SimpleNamespace(trajectory=trajectory, reward=reward, group=group)


def seq_logprob(trainer, trajectory):
    batch = collate([trajectory]).to(trainer.device)
    with torch.no_grad():
        lp = forward_logprobs(trainer.model, batch)["logprobs"]
    return float((lp * batch.loss_mask).sum())


PROMPT = [5, 6, 7, 8, 9, 10]
GOOD, BAD = [40, 41, 42, 43], [50, 51, 52, 53]


@pytest.mark.parametrize("algorithm,n,critic", [("grpo", 2, None), ("ppo", 1, "separate"), ("ppo", 1, "shared-head"), ("reinforce++", 2, None)])
def test_one_step_raises_the_rewarded_response_and_lowers_the_other(tmp_path, algorithm, n, critic):
    trainer = built(tmp_path, algorithm=algorithm, n=n, lr=3e-3, kl_coef=0.01, micro_batch_size=1, **({"critic": critic} if critic else {}))
    good, bad = sampled(trainer, PROMPT, GOOD), sampled(trainer, PROMPT, BAD)
    before = seq_logprob(trainer, good), seq_logprob(trainer, bad)
    stats = trainer.update([result(good, 1.0, 0), result(bad, 0.0, 0)])
    after = seq_logprob(trainer, good), seq_logprob(trainer, bad)
    assert after[0] > before[0] and after[1] < before[1], (algorithm, before, after)
    assert stats["logprob_diff_max"] < 1e-4  # the recorded logprobs are the model's
    assert math.isfinite(stats["loss"]) and stats["grad_norm"] > 0


def test_one_grpo_update_raises_the_rewarded_completion_and_reports_its_learning_signal(tmp_path):
    """Issue 66's check: one GRPO update on a group of a rewarded and an unrewarded completion
    raises the rewarded one's sequence logprob and lowers the other's; the update's
    diagnostics say what it trained (advantage spread, share of response tokens trained)."""
    trainer = built(tmp_path, algorithm="grpo", n=2, lr=3e-3, micro_batch_size=2)
    good, bad = sampled(trainer, PROMPT, GOOD, observation=[60, 61, 62, 63]), sampled(trainer, PROMPT, BAD, observation=[60, 61, 62, 63])
    before = seq_logprob(trainer, good), seq_logprob(trainer, bad)
    stats = trainer.update([result(good, 1.0, 0), result(bad, 0.0, 0)])
    after = seq_logprob(trainer, good), seq_logprob(trainer, bad)
    assert after[0] > before[0] and after[1] < before[1], (before, after)
    # advantages +-1/sqrt(2) on 4 generated tokens each: their std over the 8 trained tokens
    assert stats["adv_std"] == pytest.approx(math.sqrt(8 * 0.5 / 7), rel=1e-4)
    assert stats["trained_token_share"] == pytest.approx(0.5)  # 4 generated of 8 response tokens (4 observed)
    assert stats["grad_norm"] > 0 and stats["clip_fraction"] == 0.0 and stats["entropy"] > 0


def test_one_update_per_batch_skips_the_old_logprob_pass_and_updates_as_two_passes_would(tmp_path):
    """With ppo_epochs=1 and mini_batches=1 the old logprobs are the update's own, detached
    (ratio 1): its gradient equals the two-pass one's (old logprobs from a no-grad pass, forced
    here by a KL penalty in the reward too small to matter) up to float rounding."""
    grads = []
    for name, changes in (("single", {}), ("two-pass", {"kl_coef": 1e-30, "kl_in_reward": True})):
        trainer = built(tmp_path / name, algorithm="reinforce++", reinforce_baseline="group", lr=3e-3, micro_batch_size=1, **changes)
        start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        batch = [result(sampled(trainer, PROMPT, GOOD), 1.0, 0), result(sampled(trainer, PROMPT, BAD), 0.0, 0)]
        calls = []
        original = trainer.model.forward
        trainer.model.forward = lambda *a, **k: (calls.append(torch.is_grad_enabled()), original(*a, **k))[1]
        stats = trainer.update(batch)
        assert stats["clip_fraction"] == 0 and stats["logprob_diff_max"] < 1e-4
        grads.append({n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()})
        assert any(not torch.equal(p, start[n]) for n, p in trainer.model.named_parameters())
        no_grad_passes = calls.count(False)
        assert no_grad_passes == (0 if name == "single" else 2), calls  # two-pass: old logprobs of 2 rows (the reference is a copy)
    for n in grads[0]:  # the gradients (Adam's steps magnify rounding in near-zero ones)
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-6)


def test_the_logprob_check_of_a_single_pass_update_stops_before_the_step(tmp_path):
    trainer = built(tmp_path, algorithm="grpo", lr=3e-3, logprob_check_atol=1e-3)
    start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    good, bad = sampled(trainer, PROMPT, GOOD), sampled(trainer, PROMPT, BAD)
    stale = Trajectory(good.prompt_ids)
    stale.add_generated(good.segments[0].token_ids, tuple(lp - 0.5 for lp in good.segments[0].logprobs), "stop")
    with pytest.raises(TrainingError, match=r"Step 1: rollout and trainer logprobs differ by up to 0\.5 \(limit 0\.001\)"):
        trainer.update([result(stale, 1.0, 0), result(bad, 0.0, 0)])
    assert all(torch.equal(p, start[n]) for n, p in trainer.model.named_parameters())


def test_observation_tokens_get_no_gradient(tmp_path):
    """Two batches that differ only in the observation ids after the last generated token
    give bit-identical updates: masked targets contribute nothing."""
    deltas = []
    for obs in ([60, 61, 62], [70, 71, 72]):
        trainer = built(tmp_path / str(obs[0]), algorithm="grpo", kl_coef=0.1, entropy_coef=0.01)
        start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        batch = [result(sampled(trainer, PROMPT, GOOD, obs), 1.0, 0), result(sampled(trainer, PROMPT, BAD, obs), 0.0, 0)]
        trainer.update(batch)
        deltas.append({n: p.detach() - start[n] for n, p in trainer.model.named_parameters()})
    assert any(d.abs().max() > 0 for d in deltas[0].values())
    for name in deltas[0]:
        assert torch.equal(deltas[0][name], deltas[1][name]), name


def test_logprobs_are_computed_from_the_first_trained_target_on_and_equal_the_full_pass(tmp_path):
    trainer = built(tmp_path)
    batch = collate([sampled(trainer, PROMPT, GOOD, [60, 61]), sampled(trainer, PROMPT[:3], BAD)]).to(trainer.device)
    calls = []
    hook = trainer.model.register_forward_pre_hook(lambda m, a, k: calls.append(k.get("logits_to_keep")), with_kwargs=True)
    out = forward_logprobs(trainer.model, batch, with_entropy=True)
    hook.remove()
    start = 2  # the second row's first sampled id is its 4th token: target column 2
    assert calls == [batch.input_ids.shape[1] - start]
    with torch.no_grad():
        logp = torch.log_softmax(trainer.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float(), -1)
    full = logp.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, L-1]
    entropy = -(logp.exp() * logp).sum(-1)  # [B, L-1]
    torch.testing.assert_close(out["logprobs"][:, start:].detach(), full[:, start:])
    torch.testing.assert_close(out["entropy"][:, start:].detach(), entropy[:, start:])
    assert torch.all(out["logprobs"][:, :start] == 0) and torch.all(batch.loss_mask[:, :start] == 0)


def test_masked_logprobs_receive_exactly_zero_gradient(tmp_path):
    from searchgym.training.losses import AGGREGATIONS, aggregate, kl_penalty, policy_loss

    trainer = built(tmp_path)
    batch = collate([sampled(trainer, PROMPT, GOOD, [60, 61]), sampled(trainer, PROMPT[:3], BAD)]).to(trainer.device)
    for mode in AGGREGATIONS:
        out = forward_logprobs(trainer.model, batch, with_entropy=True)
        lp, ent = out["logprobs"], out["entropy"]
        lp.retain_grad()
        ent.retain_grad()
        m = batch.loss_mask
        loss, _ = policy_loss(lp, lp.detach() - 0.1, torch.randn_like(lp), m, mode=mode)
        loss = loss + aggregate(kl_penalty(lp, lp.detach() + 0.3), m, mode) - 0.1 * aggregate(ent, m, mode)
        loss.backward()
        assert (lp.grad[m == 0] == 0).all() and (ent.grad[m == 0] == 0).all()
        assert (lp.grad[m == 1] != 0).all()
        trainer.model.zero_grad()


def test_config_errors_fail_before_any_model_loads(tmp_path, monkeypatch):
    import searchgym.training.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "load_policy", lambda *a, **k: pytest.fail("a model was loaded"))
    cases = [
        ({"algorithm": "dpo"}, "Unknown algorithm 'dpo'. Did you mean 'ppo'? Expected one of: grpo, ppo, reinforce++, sb3-dqn, sb3-ppo."),
        ({"algorithm": "grpo", "n": 1}, "GRPO normalizes rewards within a group of answers to one question and needs n >= 2, got n=1."),
        ({"engine": "sglang"}, "Unknown rollout engine 'sglang'. Expected one of: transformers, vllm, vllm-async."),
        ({"kl_estimator": "k4"}, "Unknown KL estimator 'k4'. Expected one of: k1, k2, k3."),
        ({"stage2_reward": "r1_searcher_stage2"}, "Args.stage2_reward and Args.stage2_step go together"),
        ({"micro_batch_size": 0}, "Args.micro_batch_size expects a positive integer, got 0."),
        ({"temperature": 0.0}, "Greedy rollouts (temperature 0) give n identical answers per question"),
        ({"kl_in_reward": True}, "GRPO adds its KL term to the loss; kl_in_reward applies to ppo and reinforce++ only."),
        ({"summarizer": "llm"}, "summarizer='llm' needs a frozen model to summarize with; set frozen_model (e.g. 'smollm2')."),
        ({"frozen_backend": "ollama"}, "Unknown frozen_backend 'ollama'. Did you mean 'vllm'? Expected one of: openai, transformers, vllm, vllm-async."),
        ({"frozen_options": "base_url"}, "Args.frozen_options expects a dict, got str."),
        ({"env_id": "Nope-v0"}, "Unknown env id 'Nope-v0'. Expected one of: AutoRefine-v0, DeepResearch-v0, MultiAgentGenerator-v0, MultiAgentSearcher-v0, MultiAgentSummarizer-v0, ParallelSearch-v0, R1Searcher-v0, RECON-v0, RSearch-v0, S3-v0, SearchR1-v0, StepSearch-v0, ZeroSearch-v0."),
    ]
    for changes, message in cases:
        with pytest.raises(SearchGymError) as e:
            Trainer(Args(out=str(tmp_path / "x"), **changes))
        assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ConfigError, match="has no generated token to train on"):
        collate([Trajectory((1, 2, 3))])


def test_a_split_the_dataset_lacks_fails_before_the_model_loads_or_the_run_folder_is_written(tmp_path, monkeypatch):
    import searchgym.training.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "load_policy", lambda *a, **k: pytest.fail("a model was loaded"))
    wiki = {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable"}
    message = (
        "Args.train_split 'train' is not a split of this env's dataset: Unknown wiki-vital-answerable split 'train'. "
        "Expected one of: all, dev. Pass --train-split (Args.train_split)."
    )
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        Trainer(tiny_args(tmp_path, env_options=wiki)).build()
    with pytest.raises(ConfigError, match=r"^Args\.eval_split 'tset' is not a split .* Did you mean 'test'\?"):
        Trainer(tiny_args(tmp_path, eval_split="tset", eval_every=1)).build()
    assert not (tmp_path / "run").exists()  # nothing written: the corrected command is not refused as a changed run


def test_presets_and_field_docs():
    docs = field_docs()
    assert set(docs) == {f for f in Args.__dataclass_fields__}  # every field documented
    for name in ("search-r1-ppo", "search-r1-grpo", "r1-searcher", "s3", "r-search", "recon"):
        check_args(preset(name))
    assert preset("r1-searcher").stage2_reward == "r1_searcher_stage2"
    # R-Search trains on top-3 and evaluates on top-5 (§4.3).
    assert preset("r-search").eval_env_options == {"top_k": 5} and preset("r-search").env_options == {}
    with pytest.raises(SearchGymError, match="Unknown training preset 'search-r2'"):
        preset("search-r2")


def test_a_run_writes_metrics_curves_checkpoints_and_a_loadable_final_model(tmp_path):
    trainer = Trainer(tiny_args(tmp_path, eval_every=2, eval_limit=2, tensorboard=True))
    rows = trainer.train()
    out = tmp_path / "run"
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[-1]["eval_em"] is not None and "eval_reward" in rows[-1]
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["step", "stage_reward", "episodes"]
    lines = (out / "metrics.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["0", "1", "2"]  # the step-0 evaluation, then steps
    assert (out / "curves.png").stat().st_size > 10_000
    assert any((out / "tensorboard").iterdir())
    assert [p.name for p in ckpt.complete_checkpoints(out)] == ["step-000001", "step-000002"]
    assert (out / "eval" / "step-000002" / "summary.json").is_file()
    # A few rollouts of each step, with their tokens as the policy's tokenizer reads them: what searchgym view shades.
    kept = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in kept] == [1, 1, 2, 2] and len({r["example_id"] for r in kept[:2]}) == 2
    kinds = [kind for kind, _ in kept[0]["tokens"]]
    assert kinds[0] == "prompt" and "generated" in kinds and set(kinds) <= {"prompt", "generated", "observation"}
    generated = sum(len(pieces) for kind, pieces in kept[0]["tokens"] if kind == "generated")
    assert generated == kept[0]["generated_tokens"]
    from searchgym.view import load_runs

    data = load_runs([out])
    assert data["folders"][0]["kind"] == "train" and data["folders"][0]["curves"]["steps"] == [0, 1, 2]
    assert "reward" in data["folders"][0]["curves"]["series"] and data["folders"][0]["evals"] == [0, 2]
    assert [r["label"] for r in data["runs"]][-1] == "training rollouts"
    assert sum("tokens" in ep for ep in data["episodes"]) == 4
    from searchgym.lm.hf import TransformersLM

    lm = TransformersLM(str(out / "final"))
    final = dict(lm.model.named_parameters())
    for name, p in trainer.model.named_parameters():
        assert torch.equal(final[name], p.detach()), name
    # Running again is a no-op resume; a different setting is refused.
    assert Trainer(tiny_args(tmp_path, eval_every=2, eval_limit=2)).train() == []
    with pytest.raises(ConfigError, match=r"holds a run with different settings \(changed: lr\)"):
        Trainer(tiny_args(tmp_path, lr=0.5)).train()
    with pytest.raises(ConfigError, match="is not empty; pick another --out"):
        Trainer(tiny_args(tmp_path, resume=False)).train()


def _weights(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def test_resume_after_a_kill_reproduces_the_uninterrupted_run(tmp_path):
    """A real SIGKILL of `searchgym train` at an arbitrary moment, then a resume: the next
    step's metrics and the weights equal those of a run that was never interrupted."""
    out = tmp_path / "killed"
    cmd = [
        sys.executable, "-m", "searchgym.cli", "train", "--model", str(tiny_model_folder()),
        "--env-options", '{"corpus_options": {"seed": 7, "num_passages": 400}, "max_turns": 2}',
        "--out", str(out), "--total-steps", "1000", "--questions-per-step", "2", "--n", "2", "--num-envs", "4",
        "--max-new-tokens", "8", "--micro-batch-size", "2", "--lr", "1e-3", "--save-every", "1",
        "--no-progress", "--no-tensorboard", "--threads", "1",
    ]
    assert SMALL_WORLD == {"seed": 7, "num_passages": 400}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(ckpt.complete_checkpoints(out)) < 2:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(ckpt.latest_checkpoint(out).name.split("-")[1])
    assert killed_at >= 2
    resumed = Trainer(tiny_args(tmp_path, out=str(out), total_steps=killed_at + 1))
    resumed_rows = resumed.train()
    assert [r["step"] for r in resumed_rows] == [killed_at + 1]
    straight = Trainer(tiny_args(tmp_path, out=str(tmp_path / "straight"), total_steps=killed_at + 1))
    straight_rows = straight.train()
    for key in ("reward", "loss", "policy_loss", "kl", "entropy", "grad_norm", "response_tokens"):
        assert resumed_rows[0][key] == straight_rows[-1][key], key
    a, b = _weights(resumed), _weights(straight)
    assert all(torch.equal(a[n], b[n]) for n in a)
    steps = [line.split(",")[0] for line in (out / "metrics.csv").read_text().splitlines()[1:]]
    assert steps == [str(i) for i in range(1, killed_at + 2)]  # no duplicated or half-written rows


def test_a_checkpoint_write_killed_midway_leaves_the_previous_one(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, 1, {"w": torch.ones(3)})
    real_save = torch.save

    def dying_save(obj, f, *a, **k):
        real_save({"partial": True}, f)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(tmp_path, 2, {"w": torch.zeros(3)})
    monkeypatch.setattr(torch, "save", real_save)
    latest = ckpt.latest_checkpoint(tmp_path)
    assert latest.name == "step-000001" and torch.equal(ckpt.load_checkpoint(latest)["w"], torch.ones(3))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-000001"]  # leftovers removed
    # Renamed but the pointer not yet updated: found by scanning.
    ckpt.save_checkpoint(tmp_path, 3, {"w": torch.full((3,), 3.0)}, keep=5)
    (tmp_path / "checkpoints" / "latest").write_text("step-000001\n")
    assert ckpt.latest_checkpoint(tmp_path).name == "step-000003"


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = built(tmp_path)
    trainer.save()
    saved = trainer.checkpoint
    before = _weights(trainer)
    good, bad = sampled(trainer, PROMPT, GOOD), sampled(trainer, PROMPT, BAD)
    with pytest.raises(TrainingError, match=r"Step 1: the loss is nan .* The update was not applied\. The last good checkpoint is .*step-000000"):
        trainer.update([result(good, float("nan"), 0), result(bad, 0.0, 0)])
    assert all(torch.equal(before[n], p) for n, p in _weights(trainer).items())
    assert ckpt.latest_checkpoint(tmp_path / "run") == saved


def test_an_empty_batch_stops_the_run(tmp_path):
    # tiny-random's context (256 tokens) cannot hold the Search-R1 prompt: every episode is prompt_too_long.
    trainer = Trainer(tiny_args(tmp_path, model="tiny-random"))
    with pytest.raises(TrainingError, match=r"Step 1: no episode of the rollout batch has a token to train on \(outcomes: \{'prompt_too_long': 4\}"):
        trainer.train()


def test_lora_trains_only_the_adapters_and_merges_for_export(tmp_path):
    pytest.importorskip("peft")
    trainer = built(tmp_path, lora_rank=4, lr=1e-2, kl_coef=0.01)
    base = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    good, bad = sampled(trainer, PROMPT, GOOD), sampled(trainer, PROMPT, BAD)
    before = seq_logprob(trainer, good)
    trainer.update([result(good, 1.0, 0), result(bad, 0.0, 0)])
    trainer.update([result(good, 1.0, 0), result(bad, 0.0, 0)])
    assert seq_logprob(trainer, good) > before
    assert all(torch.equal(base[n], p) for n, p in trainer.model.named_parameters() if n in base)
    merged = trainer.merged_weights()
    assert not any("lora_" in n or "base_layer" in n for n in merged)
    trainer.export(tmp_path / "export")
    from searchgym.lm.hf import TransformersLM

    plain = TransformersLM(str(tmp_path / "export"), device=trainer.device).model
    batch = collate([good]).to(trainer.device)
    with torch.no_grad():
        a = forward_logprobs(plain, batch)["logprobs"]
        b = forward_logprobs(trainer.model, batch)["logprobs"]
    assert torch.allclose(a, b, atol=1e-5)
    for name, tensor in plain.state_dict().items():
        assert torch.allclose(merged[name], tensor, atol=1e-6), name


def test_the_token_limits_reach_the_rollouts_and_the_evaluation_samples_at_eval_temperature(tmp_path):
    """--paper-scale's max_observation_tokens and max_context_tokens bound the rollouts the
    trainer plays and its evaluation; the evaluation samples at eval_temperature."""
    one = dict(train_limit=1, questions_per_step=1)  # one question: one prompt length
    cut = built(tmp_path / "cut", max_observation_tokens=3, eval_temperature=0.7, eval_limit=2, **one)
    feedback = cut.envs[0].unwrapped.protocol.invalid_feedback()  # what a random turn reads back
    assert len(cut.tokenizer.encode(feedback, add_special_tokens=False)) > 3
    results, _ = cut.rollout(1)
    observations = [len(s) for r in results for s in r.trajectory.segments if not s.generated]
    assert observations and max(observations) == 3
    cut.evaluate()
    config = json.loads((tmp_path / "cut" / "run" / "eval" / "step-000000" / "config.json").read_text())
    assert config["temperature"] == 0.7 and config["agent_options"] == {"lm": {"max_observation_tokens": 3}}
    (prompt,) = {len(r.trajectory.prompt_ids) for r in results}
    short = built(tmp_path / "short", max_context_tokens=prompt + 8, **one)  # the first turn fits; with its feedback the second cannot
    results, _ = short.rollout(1)
    assert {r.outcome for r in results} == {"prompt_too_long"}
    assert all([s.generated and len(s) > 0 for s in r.trajectory.segments] == [True, False, False] for r in results)


def test_r1_searcher_curriculum_switches_the_reward(tmp_path):
    trainer = Trainer(tiny_args(tmp_path, env_id="R1Searcher-v0", reward="r1_searcher_stage1", stage2_reward="r1_searcher_stage2", stage2_step=1))
    rows = trainer.train()
    assert [r["stage_reward"] for r in rows] == ["r1_searcher_stage1", "r1_searcher_stage2"]
    assert trainer.envs[0].unwrapped.recipe.name == "r1_searcher_stage2"


def test_s3_trains_the_searcher_while_the_frozen_generator_stays_fixed(tmp_path):
    folder = str(tiny_model_folder())
    trainer = Trainer(tiny_args(
        tmp_path, env_id="S3-v0", frozen_model=folder, total_steps=1, max_new_tokens=6, entropy_coef=0.01,
        env_options={**SMALL, "initial_top_k": 1, "top_k": 1},
    ))
    trainer.build()
    frozen_before = {n: p.detach().clone() for n, p in trainer.frozen.model.named_parameters()}
    policy_before = _weights(trainer)
    rows = trainer.train()
    assert rows[0]["episodes"] == 4
    assert trainer.frozen.model is not trainer.model
    assert all(torch.equal(frozen_before[n], p) for n, p in trainer.frozen.model.named_parameters())
    assert any(not torch.equal(policy_before[n], p) for n, p in _weights(trainer).items())


def test_retrieval_is_timed_by_the_retriever_the_envs_are_built_with_and_the_shared_one_is_left_alone(tmp_path):
    import pickle

    from env_helpers import make_small

    trainer = built(tmp_path, env_options={**SMALL, "retriever_options": {"k1": 1.2}})
    _, stats = trainer.rollout(0)
    timed = trainer.retrieval
    assert stats["time_retrieval"] == timed.seconds  # the first rollout's retrieval is all of it
    assert all(env.unwrapped.retriever is timed for env in trainer.envs)  # passed as the env's retriever option
    shared = make_small("searchgym/SearchR1-v0", retriever_options={"k1": 1.2}).unwrapped.retriever
    assert isinstance(timed, TimedRetriever) and timed.inner is shared
    assert "search" not in vars(shared)  # not patched on the instance every env shares
    pickle.dumps(make_small("searchgym/SearchR1-v0"))


def test_training_samples_keep_the_question_groups_and_drop_what_cannot_be_trained():
    good = Trajectory((1, 2))
    good.add_generated((3,), (-0.5,), "stop")
    episode = lambda trajectory, outcome="completed", reward=1.0: SimpleNamespace(trajectory=trajectory, outcome=outcome, reward=reward)  # noqa: E731
    results = [episode(good), episode(good, reward=0.0), episode(Trajectory((1, 2))), episode(good), episode(good, "error"), episode(None)]
    assert training_samples(results, n=2, grouped=False) == [Sample(good, 1.0, 0), Sample(good, 0.0, 0), Sample(good, 1.0, 1)]
    assert training_samples(results, n=2, grouped=True) == [Sample(good, 1.0, 0), Sample(good, 0.0, 0)]  # question 1 kept one answer
    assert training_samples(results, n=3, grouped=True) == [Sample(good, 1.0, 0), Sample(good, 0.0, 0)]


def test_metrics_log_drops_rows_after_the_resumed_step_and_rejects_unknown_columns(tmp_path):
    path = tmp_path / "m.csv"
    log = MetricsLog(path, ["step", "loss"])
    for i in range(1, 4):
        log.log({"step": i, "loss": 1.0 / i})
    with open(path, "a") as f:
        f.write("4,0.2")  # a row cut by a kill
    resumed = MetricsLog(path, ["step", "loss"], resume_step=2)
    assert [r["step"] for r in resumed.rows] == [1, 2]
    assert path.read_text().splitlines() == ["step,loss", "1,1", "2,0.5"]
    with pytest.raises(KeyError, match=r"\['los'\]"):
        resumed.log({"step": 3, "los": 1})


def test_train_cli_help_and_errors(tmp_path):
    from searchgym.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert main(["train", "--algorithm", "grpo", "--n", "1", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_a_step_whose_advantages_are_all_zero_says_why_once(tmp_path, capsys):
    trainer = built(tmp_path, algorithm="grpo", lr=3e-3, micro_batch_size=1)
    start = _weights(trainer)
    unrewarded = [result(sampled(trainer, PROMPT, GOOD), 0.0, 0), result(sampled(trainer, PROMPT, BAD), 0.0, 0)]
    capsys.readouterr()  # the model's loading
    stats = trainer.update(unrewarded)
    assert stats["loss"] == 0 and stats["grad_norm"] == 0
    assert all(torch.equal(p, start[n]) for n, p in trainer.model.named_parameters())
    err = capsys.readouterr().err
    assert err == (
        "step 1: every advantage is 0 (all 2 episodes of the batch earned the same reward (0.000), and an advantage is a "
        "reward measured against its baseline), so the policy loss is 0, grad_norm too without a KL or entropy term, and "
        "the batch teaches the policy nothing (said once a run). A policy that never answers right earns 0 "
        "everywhere (a tiny or random model does): warm it up first (searchgym sft on the oracle's play) or give it "
        "easier questions.\n"
    )
    trainer.update(unrewarded)
    assert capsys.readouterr().err == ""  # once a run
    # A batch with a reward difference has advantages: nothing is said.
    fresh = built(tmp_path / "fresh", algorithm="grpo", lr=3e-3, micro_batch_size=1)
    rewarded = [result(sampled(fresh, PROMPT, GOOD), 1.0, 0), result(sampled(fresh, PROMPT, BAD), 0.0, 0)]
    capsys.readouterr()
    fresh.update(rewarded)
    assert capsys.readouterr().err == ""


def test_options_another_option_turns_off_are_named_with_what_turns_them_off(tmp_path, capsys):
    from searchgym.training.args import disabled_options

    assert disabled_options(Args(eval_limit=4)) == [
        "--eval-limit 4 does nothing: no evaluation runs while --eval-every is 0 (set --eval-every N to evaluate every N "
        "steps and at the end)."
    ]
    assert disabled_options(Args(eval_limit=4, eval_every=2)) == []
    assert disabled_options(Args(algorithm="grpo", value_lr=1e-3, lam=0.9, gamma=0.99, kl_estimator="k1", lora_alpha=16.0)) == [
        "--value-lr 0.001, --lam 0.9 do nothing: --algorithm grpo has no critic and no GAE (PPO's).",
        "--gamma 0.99 does nothing: GRPO's advantage is the group-normalized outcome, with no discount.",
        "--kl-estimator k1 does nothing: --kl-coef is 0 (no KL term).",
        "--lora-alpha 16.0 does nothing: --lora-rank is 0 (no LoRA: every weight trains).",
    ]
    assert disabled_options(Args(algorithm="ppo", n=1, value_lr=1e-3, lam=0.9, gamma=0.99)) == []
    assert disabled_options(Args(reinforce_baseline="group")) == ["--reinforce-baseline group does nothing: --algorithm grpo has no REINFORCE++ baseline."]
    assert disabled_options(Args(warmup_ratio=0.1, warmup_steps=5)) == ["--warmup-steps 5 does nothing: --warmup-ratio sets the warmup instead."]
    from searchgym.cli import main

    assert main(["train", "--model", "tiny-random", "--n", "4", "--eval-limit", "4", "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    assert "warning: --eval-limit 4 does nothing: no evaluation runs while --eval-every is 0" in capsys.readouterr().err
    # On the command line only the flags typed are named: R-Search's preset sets its evaluation's temperature and
    # options without --eval-every, which a Python caller is told about, a command line not.
    assert disabled_options(preset("r-search"))[0].startswith("--eval-temperature 0.1, --eval-env-options")
    assert main(["train", "--preset", "r-search", "--model", "tiny-random", "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    assert "warning" not in capsys.readouterr().err
    # The trainer itself warns a Python caller (about options not at their default).
    Trainer(tiny_args(tmp_path, eval_limit=3))
    assert "warning: --eval-limit 3 does nothing" in capsys.readouterr().err


def test_sft_options_another_option_turns_off_are_named():
    from searchgym.training.sft import SFTArgs, sft_disabled_options

    assert sft_disabled_options(SFTArgs(eval_limit=0, eval_every=4, max_new_tokens=32)) == [
        "--eval-every 4, --max-new-tokens 32 do nothing: --eval-limit is 0 (no evaluation).",
    ]
    assert sft_disabled_options(SFTArgs(model="tiny-random", scratch_size="tiny", pretrain_block=128)) == [
        "--pretrain-block 128 does nothing: --pretrain-epochs is 0 (no pretraining).",
        "--scratch-size tiny does nothing: --model is 'tiny-random': size and vocabulary are those of a new scratch model.",
    ]
    assert sft_disabled_options(SFTArgs(eval_every=4, scratch_size="tiny")) == []


def test_a_failing_recipe_stops_training_showing_its_exception_and_line(tmp_path, monkeypatch):
    (tmp_path / "broken_recipe_t.py").write_text(
        "from searchgym.rewards import RewardRecipe\n\n\n"
        "class Broken(RewardRecipe):\n"
        "    name = 'broken'\n\n"
        "    def score(self, episode):\n"
        "        return episode.metadata['no_such_key']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_recipe_t", raising=False)
    with pytest.raises(TrainingError) as e:
        Trainer(tiny_args(tmp_path, total_steps=1, reward="broken_recipe_t:Broken")).train()
    message = str(e.value)
    assert "no episode of the rollout batch has a token to train on (outcomes: {'error': 4}" in message
    assert "4 of 4 episodes failed; the first (" in message
    assert "Reward recipe 'broken' (broken_recipe_t:Broken) raised in score()" in message
    assert "KeyError: 'no_such_key'" in message and re.search(r"\(at \S*broken_recipe_t\.py:8\)", message)
    sys.modules.pop("broken_recipe_t", None)


def test_lr_0_is_a_no_update_control_and_a_negative_lr_is_refused(tmp_path):
    """``lr=0`` plays, scores and logs every step as a run that learns, and the weights stay
    exactly those it started from (benchmarks/learning_curve.py's control); below 0 is refused.
    An entropy term gives every step a gradient whatever the rewards, so the same run at lr 1e-3
    changes the weights (the check can fail)."""
    import torch

    def changed(lr, out):
        trainer = built(tmp_path / out, lr=lr, entropy_coef=0.05, total_steps=2, save_every=2)
        before = _weights(trainer)
        rows = trainer.train()
        assert [r["step"] for r in rows] == [1, 2] and all(r["episodes"] == 4 and math.isfinite(r["loss"]) for r in rows)
        assert all(r["grad_norm"] > 0 for r in rows)
        return [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]

    assert changed(0.0, "control") == []
    assert changed(1e-3, "learning")
    with pytest.raises(ConfigError, match=r"Args\.lr expects a number >= 0 \(0: a no-update control\), got -0\.1"):
        check_args(tiny_args(tmp_path, lr=-0.1))
