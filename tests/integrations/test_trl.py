"""searchgym envs trained by TRL's real GRPOTrainer through EnvRollout (tiny random model, CPU)."""

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from searchgym.integrations.trl import EnvRollout, env_reward, rollout_output  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402

SMALL = {"corpus_options": SMALL_WORLD, "max_turns": 2}
#: The s3 searcher role with short prompts (the tiny model's context); its rewards vary even for random play.
SEARCHER = {"corpus_options": SMALL_WORLD, "max_searcher_turns": 2, "initial_top_k": 1, "top_k": 1}


def longer_is_better(completion_ids, env_metrics, **kwargs):
    """A second reward that varies inside each group, so the advantages are not all 0."""
    return [m["generated_tokens"] + sum(ids) % 97 / 97 for ids, m in zip(completion_ids, env_metrics)]


def make_trainer(tmp_path, rollout, train, *, eval_dataset=None, reward_funcs=None, peft_config=None, **config):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = str(tiny_model_folder())
    options = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=2,
        learning_rate=1e-2, report_to=[], logging_steps=1, save_strategy="no", use_cpu=True, bf16=False, seed=0,
        temperature=1.0, max_completion_length=64,
    )
    if eval_dataset is not None:
        options.update(per_device_eval_batch_size=4, num_generations_eval=2)
    options.update(config)
    return trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder), processing_class=AutoTokenizer.from_pretrained(folder),
        reward_funcs=reward_funcs or [env_reward, longer_is_better], rollout_func=rollout, train_dataset=train,
        eval_dataset=eval_dataset, args=trl.GRPOConfig(**options), peft_config=peft_config,
    )


def record_loss_inputs(trainer):
    """Keep each loss call's inputs and the per-token logprobs it differentiated."""
    calls = []
    compute_loss, logps = trainer._compute_loss, trainer._get_per_token_logps_and_entropies

    def recording_logps(*args, **kwargs):
        per_token_logps, entropies, aux = logps(*args, **kwargs)
        if per_token_logps.requires_grad:
            per_token_logps.retain_grad()
            calls[-1]["logps"] = per_token_logps
        return per_token_logps, entropies, aux

    def recording_loss(model, inputs):
        calls.append({"inputs": inputs})
        return compute_loss(model, inputs)

    trainer._get_per_token_logps_and_entropies = recording_logps
    trainer._compute_loss = recording_loss
    return calls


@pytest.mark.parametrize(
    "env_id,options",
    [("SearchR1-v0", SMALL), ("MultiAgentSearcher-v0", SEARCHER)],
)
def test_grpo_trains_on_the_agents_tokens_only(tmp_path, env_id, options):
    rollout = EnvRollout(env_id, env_options=options, max_new_tokens=8, num_envs=4)
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=8))
    calls = record_loss_inputs(trainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    seen = []

    def call(prompts, tr):
        out = rollout(prompts, tr)
        seen.append((list(prompts), list(rollout.last_results), out, tr.model.training))
        return out

    trainer.rollout_func = call
    trainer.train()

    assert trainer.model.training, "the rollout left the training model in eval mode"
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])]
    assert changed, "two GRPO steps through TRL changed no parameter"
    assert len(seen) == 2 and all(training for *_, training in seen), "the rollout left the model in eval mode"
    for prompts, results, out, _ in seen:
        # TRL repeats each question num_generations times; one episode per prompt, each its own sample.
        assert len(results) == len(prompts) == 4 and prompts[0] == prompts[1] and prompts[2] == prompts[3]
        assert [r.example_id for r in results][::2] == [rollout._questions[("train", False)][p] for p in prompts[::2]]
        for r, ids, mask, lps, reward in zip(results, out["completion_ids"], out["env_mask"], out["logprobs"], out["env_reward"]):
            t = r.trajectory
            assert reward == r.reward
            # The masked tokens are exactly the observation tokens, in place.
            observation = [tok for s in t.segments if not s.generated for tok in s.token_ids]
            assert observation, "every episode of two turns has an observation between them"
            assert [tok for tok, m in zip(ids, mask) if m == 0] == observation
            assert [tok for tok, m in zip(ids, mask) if m == 1] == [tok for s in t.segments if s.generated for tok in s.token_ids]
            assert [lp for lp, m in zip(lps, mask) if m == 1] == [lp for s in t.segments if s.generated for lp in s.logprobs]
            feedback = trainer.processing_class.decode(observation)
            assert rollout._envs[("train", False)][0].unwrapped.protocol.invalid_feedback().strip()[:20] in feedback
    # The loss read the agent's tokens only: its gradient is 0 at every observation token
    # and not 0 at generated ones, and TRL's mask is the env mask row for row.
    assert calls and all("logps" in c for c in calls)
    completions = {tuple(r.trajectory.response_ids): r.trajectory.loss_mask for _, rs, _, _ in seen for r in rs}
    grad_on_agent = 0.0
    for c in calls:
        inputs, grad = c["inputs"], c["logps"].grad
        for row in range(inputs["completion_ids"].shape[0]):
            width = int(inputs["completion_mask"][row].sum())
            ids = tuple(inputs["completion_ids"][row, :width].tolist())
            env_mask = torch.tensor(completions[ids], dtype=torch.float32)
            used = (inputs["completion_mask"][row] * inputs["tool_mask"][row])[:width].float()
            assert torch.equal(used, env_mask)
            assert torch.all(grad[row, :width][env_mask == 0] == 0)
            assert torch.all(grad[row, width:] == 0)
            grad_on_agent += float(grad[row, :width][env_mask == 1].abs().sum())
    assert grad_on_agent > 0


def test_rewards_and_components_are_the_envs(tmp_path):
    rollout = EnvRollout("SearchR1-v0", env_options={**SMALL, "reward": "search_r1_format"}, max_new_tokens=8, num_envs=4)
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=4), max_steps=1, reward_funcs=[env_reward])
    trainer.train()
    results = rollout.last_results
    logged = trainer.state.log_history[0]
    assert logged["rewards/env_reward/mean"] == pytest.approx(sum(r.reward for r in results) / len(results), abs=1e-6)
    for name in results[0].reward_components:
        assert logged[f"env/{name}"] == pytest.approx(sum(r.reward_components[name] for r in results) / len(results), abs=1e-6)
    assert logged["env/turns"] == pytest.approx(sum(r.num_turns for r in results) / len(results))


def test_evaluation_plays_the_eval_split_and_keeps_train_mode(tmp_path):
    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, eval_env_options={"max_turns": 1}, max_new_tokens=8, num_envs=4)
    train, dev = rollout.dataset("train", limit=4), rollout.dataset("dev", limit=2, evaluation=True)
    assert set(dev["example_id"]).isdisjoint(train["example_id"])
    trainer = make_trainer(tmp_path, rollout, train, eval_dataset=dev, max_steps=1)
    trainer.train()
    metrics = trainer.evaluate()
    assert "eval_reward" in metrics
    assert {r.example_id for r in rollout.last_results} == set(dev["example_id"])
    assert all(r.num_turns == 1 for r in rollout.last_results)  # eval_env_options applied
    trainer.model.train()
    rollout(train["prompt"][:2], trainer)
    assert trainer.model.training


def test_lora_adapters_generate_and_train(tmp_path):
    peft = pytest.importorskip("peft")
    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, max_new_tokens=8, num_envs=4)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=4), max_steps=1, peft_config=config)
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    assert lora and any(not torch.equal(p, lora[n]) for n, p in trainer.model.named_parameters() if n in lora)


@pytest.mark.parametrize(
    "option,message",
    [
        ({"top_k": 5}, "GRPOConfig.top_k=5 would make TRL score tokens drawn from another distribution. Leave top_k at 0."),
        ({"repetition_penalty": 1.2}, "Leave repetition_penalty at 1.0."),
        ({"mask_truncated_completions": True}, "Set mask_truncated_completions=False"),
    ],
)
def test_sampling_options_it_cannot_honour_fail_before_training(tmp_path, option, message):
    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, max_new_tokens=8, num_envs=2)
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=2), max_steps=1, **option)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        trainer.train()


def test_bad_inputs_raise_typed_errors(tmp_path):
    with pytest.raises(ConfigError, match="expects num_envs to be a positive integer, got 0"):
        EnvRollout("SearchR1-v0", num_envs=0)
    with pytest.raises(ConfigError, match="expects env_options to be a dict of options, got str"):
        EnvRollout("SearchR1-v0", env_options="corpus=synthwiki")
    with pytest.raises(Exception, match="Nope-v0"):
        EnvRollout("Nope-v0")
    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, max_new_tokens=8, num_envs=2)
    with pytest.raises(ConfigError, match="expects limit to be a positive integer or None, got 0"):
        rollout.dataset("train", limit=0)
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=2), max_steps=1)
    with pytest.raises(ConfigError, match=r"expects the prompts of a dataset made by EnvRollout.dataset\(split\).*'What is 2\+2\?'"):
        rollout(["What is 2+2?"], trainer)
    with pytest.raises(ConfigError, match="expects the 'env_reward' field that EnvRollout returns"):
        env_reward(["a"])
    with pytest.raises(ConfigError, match="one reward per completion, got 1 for 2"):
        env_reward(["a", "b"], env_reward=[1.0])


def test_an_episode_without_sampled_tokens_is_unscorable():
    from types import SimpleNamespace

    from searchgym.agents.trajectory import Trajectory

    t = Trajectory((1, 2, 3))
    result = SimpleNamespace(
        trajectory=t, outcome="prompt_too_long", reward=0.0, reward_components={"em": 0.0}, em=0.0, f1=0.0,
        cover_em=0.0, num_searches=0, num_turns=1, num_invalid=0, generated_tokens=0,
    )
    out = rollout_output([result], eos_id=9)
    assert out["completion_ids"] == [[9]] and out["env_mask"] == [[0]] and out["env_reward"] == [None]
    assert env_reward(["x"], env_reward=out["env_reward"]) == [None]


def run_cli(*args):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.run([sys.executable, "-m", "searchgym.integrations.trl", *args], capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.slow
def test_the_command_line_trains_and_writes_a_loadable_model(tmp_path):
    import json

    from transformers import AutoModelForCausalLM

    done = run_cli(
        "--model", str(tiny_model_folder()), "--env-id", "MultiAgentSearcher-v0", "--env-options", json.dumps(SEARCHER),
        "--num-generations", "2",
        "--batch-size", "4", "--max-new-tokens", "8", "--num-envs", "4", "--steps", "1", "--eval-limit", "2",
        "--eval-steps", "1", "--lr", "1e-2", "--out", str(tmp_path / "run"), "--config", '{"use_cpu": true, "save_strategy": "no"}',
    )
    assert done.returncode == 0, done.stderr[-3000:]
    final = tmp_path / "run" / "final"
    assert f"wrote {final}" in done.stdout
    trained = AutoModelForCausalLM.from_pretrained(final)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_folder())
    assert any(not torch.equal(a, b) for a, b in zip(trained.state_dict().values(), initial.state_dict().values()))
    assert "'eval_reward'" in done.stdout + done.stderr  # the evaluation on the dev split ran


def test_bf16_is_used_only_where_it_is_supported(monkeypatch):
    import searchgym.integrations.trl as adapter

    supported = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    assert adapter.bf16_supported() is supported
    assert adapter.resolve_bf16("auto") is supported and adapter.resolve_bf16("off") is False
    with pytest.raises(ConfigError, match=r"^--bf16 expects auto, on or off, got 'yes'\.$"):
        adapter.resolve_bf16("yes")
    monkeypatch.setattr(adapter, "bf16_supported", lambda: False)  # a machine without a bfloat16 GPU
    assert adapter.resolve_bf16("auto") is False
    with pytest.raises(ConfigError, match=r"^--bf16 on expects a CUDA GPU with bfloat16 support \(Ampere or newer\); this machine has none\. Leave --bf16 out"):
        adapter.resolve_bf16("on")
    monkeypatch.setattr(adapter, "bf16_supported", lambda: True)
    assert adapter.resolve_bf16("auto") is True and adapter.resolve_bf16("on") is True
    # What the docs' Python block passes: GRPOConfig builds with it here, whatever the machine.
    assert trl.GRPOConfig(output_dir="unused", bf16=supported, report_to=[]).bf16 is supported


def test_the_command_line_explains_bad_arguments(tmp_path):
    done = run_cli("--model", str(tiny_model_folder()), "--env-options", "{corpus: synthwiki}")
    assert done.returncode == 2 and "argument --env-options: expected a JSON object like '{\"max_turns\": 4}', got '{corpus: synthwiki}'" in done.stderr
    done = run_cli("--model", str(tiny_model_folder()), "--steps", "0")
    assert done.returncode == 2 and "--steps expects a positive integer, got 0" in done.stderr
    if not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        done = run_cli("--model", str(tiny_model_folder()), "--bf16")
        assert done.returncode == 2 and "error: --bf16 on expects a CUDA GPU with bfloat16 support" in done.stderr
    done = run_cli("--model", str(tiny_model_folder()), "--env-id", "Nope-v0")
    assert done.returncode == 2 and "Nope-v0" in done.stderr and "SearchR1-v0" in done.stderr


def test_trls_grpo_gradient_equals_searchgyms_on_the_same_batch(tmp_path):
    """The same episodes and advantages give the same policy-gradient in TRL's loss
    (dapo, clip 0.2, no KL) and in searchgym's (token-mean): the two trainers differ in
    what they sample, not in the update."""
    from searchgym.training.batch import collate, forward_logprobs
    from searchgym.training.losses import policy_loss

    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, max_new_tokens=8, num_envs=4)
    trainer = make_trainer(tmp_path, rollout, rollout.dataset("train", limit=8), max_steps=1, learning_rate=0.0, loss_type="dapo", beta=0.0)
    params = list(trainer.model.parameters())
    seen = {}
    compute_loss = trainer._compute_loss

    def recording(model, inputs):
        loss = compute_loss(model, inputs)
        seen["grad"] = torch.autograd.grad(loss, params, retain_graph=True)
        seen["inputs"] = inputs
        return loss

    trainer._compute_loss = recording
    trainer.train()
    inputs = seen["inputs"]
    by_ids = {tuple(r.trajectory.response_ids): r.trajectory for r in rollout.last_results}
    rows = range(inputs["completion_ids"].shape[0])
    widths = [int(inputs["completion_mask"][row].sum()) for row in rows]
    trajectories = [by_ids[tuple(inputs["completion_ids"][row, :w].tolist())] for row, w in zip(rows, widths)]
    batch = collate(trajectories)
    logprobs = forward_logprobs(trainer.model, batch)["logprobs"]  # [B, L-1]
    advantages = inputs["advantages"].unsqueeze(-1) * batch.loss_mask  # [B, L-1]
    assert advantages.abs().sum() > 0
    loss, _ = policy_loss(logprobs, logprobs.detach(), advantages, batch.loss_mask, clip_low=0.2, clip_high=None, mode="token-mean")
    ours = torch.autograd.grad(loss, params)
    flat_theirs = torch.cat([g.flatten() for g in seen["grad"]])
    flat_ours = torch.cat([g.flatten() for g in ours])
    # Rounding only (TRL left-pads the prompts, searchgym right-pads the rows).
    assert float(torch.nn.functional.cosine_similarity(flat_ours, flat_theirs, dim=0)) > 1 - 1e-6
    torch.testing.assert_close(flat_ours, flat_theirs, rtol=1e-2, atol=1e-4)


def test_episode_seeds_differ_by_position_step_and_mode_and_repeat_on_a_rerun():
    rollout = EnvRollout("SearchR1-v0", env_options=SMALL, seed=3)
    base, seeds = rollout.seeds(5, 0, 8, training=True)
    assert len(set(seeds)) == 8 and all(0 <= x < 2**31 for x in [base, *seeds])
    assert rollout.seeds(5, 0, 8, training=True) == (base, seeds)
    assert rollout.seeds(6, 0, 8, training=True)[0] != base
    assert rollout.seeds(5, 1, 8, training=True)[0] != base
    assert rollout.seeds(5, 0, 8, training=False)[0] != base


def test_the_command_line_names_evaluation_options_that_do_nothing():
    from searchgym.integrations.trl import cli_disabled_options, cli_parser

    parser = cli_parser()

    def notes(*argv):
        return cli_disabled_options(parser.parse_args(["--model", "m", *argv]), parser)

    assert notes("--steps", "2", "--eval-limit", "8", "--eval-steps", "2") == []
    assert notes("--steps", "2", "--eval-limit", "8") == [
        "no evaluation runs, so --eval-limit 8 does nothing: TRL evaluates every --eval-steps (50) optimizer steps and the "
        "run has 2 (--steps); lower --eval-steps to evaluate."
    ]
    assert notes("--eval-limit", "0", "--eval-split", "train", "--eval-env-options", '{"top_k": 5}') == [
        "--eval-split, --eval-env-options do nothing: --eval-limit is 0 (no evaluation)."
    ]
    assert notes("--eval-limit", "0") == []


def test_a_batch_whose_rewards_all_tie_says_why_trl_logs_a_zero_loss():
    from types import SimpleNamespace

    from searchgym.integrations.trl import zero_rewards_note

    def episodes(*rewards, capped=0):
        return [SimpleNamespace(reward=r, flags=["length"] if i < capped else []) for i, r in enumerate(rewards)]

    assert zero_rewards_note(episodes(0.0, 0.0, 0.0, 0.0, capped=4), 32) == (
        "EnvRollout: all 4 episodes of this batch earned the same reward (0.000); 4 of 4 episodes had a turn cut at "
        "max_new_tokens (32), which TRL counts in completions/clipped_ratio. GRPO's advantages are then all 0, so TRL logs "
        "a loss and grad_norm of 0 and the batch teaches the policy nothing (said once a run). A policy that never "
        "answers right earns 0 everywhere (a tiny or random model does): warm it up first (searchgym sft on the oracle's play)."
    )
    assert zero_rewards_note(episodes(0.1, 0.1), 32).startswith("EnvRollout: all 2 episodes of this batch earned the same reward (0.100). GRPO's")
    assert zero_rewards_note(episodes(0.0, 1.0, capped=2), 32) is None
    assert zero_rewards_note([], 32) is None
