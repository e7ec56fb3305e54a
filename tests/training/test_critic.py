"""PPO's critic: a separate value model whose loss never reaches the policy, the shared-head
option, resume exactness with the critic, the papers' presets and per-sequence aggregation."""

import pytest

torch = pytest.importorskip("torch")

from training.test_trainer import BAD, GOOD, PROMPT, built, result, sampled, tiny_args  # noqa: E402
from searchgym.error import ConfigError, SearchGymError  # noqa: E402
from searchgym.training.advantages import group_advantages  # noqa: E402
from searchgym.training.args import PRESETS, Args, preset  # noqa: E402
from searchgym.training.batch import collate, forward_logprobs  # noqa: E402
from searchgym.training.trainer import Trainer  # noqa: E402


def weights(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def ppo_batch(trainer):
    """Two sequences of different lengths, one rewarded."""
    return [result(sampled(trainer, PROMPT, GOOD), 1.0, 0), result(sampled(trainer, PROMPT, BAD[:2], [60, 61]), 0.0, 1)]


@pytest.mark.parametrize("critic", ["separate", "shared-head"])
def test_the_policy_update_does_not_depend_on_the_value_loss_with_a_separate_critic(tmp_path, critic):
    """Two updates that differ only in the value loss's weight and the critic's learning rate
    (two epochs of two mini-batches, so the critic moves between policy steps): a separate
    critic leaves the policy's weights bit-identical; a shared head does not (the test can fail)."""
    policies, critics = [], []
    for name, value_coef, value_lr in (("none", 0.0, 1e-5), ("large", 100.0, 1e-1)):
        trainer = built(
            tmp_path / name, algorithm="ppo", n=1, critic=critic, lr=3e-3, value_coef=value_coef, value_lr=value_lr,
            ppo_epochs=2, mini_batches=2, micro_batch_size=1, kl_coef=0.01, kl_in_reward=True, entropy_coef=0.01,
        )
        critic_start = weights(trainer.critic)
        stats = trainer.update(ppo_batch(trainer))
        assert stats["value_loss"] > 0 and stats["value_lr"] == value_lr
        policies.append(weights(trainer.model))
        critics.append(weights(trainer.critic))
        changed = [n for n, p in critics[-1].items() if not torch.equal(p, critic_start[n])]
        if value_coef:
            assert "head.weight" in changed
            if critic == "separate":  # the backbone trains too, not only the head
                assert any(n.startswith("backbone.") for n in changed), changed
                assert stats["value_grad_norm"] > 0
        else:
            assert changed == []  # no value loss, and no weight decay: the critic stays as it was
    same_policy = all(torch.equal(policies[0][n], policies[1][n]) for n in policies[0])
    assert same_policy == (critic == "separate")
    assert any(not torch.equal(critics[0][n], critics[1][n]) for n in critics[0])


def test_the_separate_critic_starts_as_a_copy_of_the_policy_base_and_holds_its_own_weights(tmp_path):
    trainer = built(tmp_path, algorithm="ppo", n=1)
    base = dict(trainer.model.base_model.named_parameters())
    backbone = dict(trainer.critic.backbone.named_parameters())
    assert set(backbone) == set(base)
    for name, p in backbone.items():
        assert torch.equal(p, base[name]) and p.data_ptr() != base[name].data_ptr(), name
    policy_params = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    critic_params = {id(p) for g in trainer.critic_optimizer.param_groups for p in g["params"]}
    assert not policy_params & critic_params and critic_params == {id(p) for p in trainer.critic.parameters()}
    assert "lm_head.weight" not in dict(trainer.critic.named_parameters())  # the value model has no vocabulary head
    batch = collate([sampled(trainer, PROMPT, GOOD)]).to(trainer.device)
    with torch.no_grad():
        values = trainer.critic.values(batch)
    assert values.shape == batch.loss_mask.shape and torch.isfinite(values).all() and values.abs().sum() > 0


def test_a_lora_critic_trains_its_own_adapters_over_base_weights_it_shares_with_the_policy(tmp_path):
    pytest.importorskip("peft")
    trainer = built(tmp_path, algorithm="ppo", n=1, lora_rank=4, lr=1e-2, value_lr=1e-2, micro_batch_size=1)
    policy = dict(trainer.model.named_parameters())
    critic = dict(trainer.critic.named_parameters())
    trainable = sorted(n for n, p in critic.items() if p.requires_grad)
    assert "head.weight" in trainable and all("lora_" in n or n.startswith("head.") for n in trainable)
    shared = [n for n, p in critic.items() if not p.requires_grad]
    policy_by_ptr = {p.data_ptr() for p in policy.values() if not p.requires_grad}
    assert shared and all(critic[n].data_ptr() in policy_by_ptr for n in shared)  # held once in memory
    frozen = {n: p.detach().clone() for n, p in critic.items() if not p.requires_grad}
    adapters = {n: critic[n].detach().clone() for n in trainable}
    policy_adapters = {n: p.detach().clone() for n, p in policy.items() if p.requires_grad}
    trainer.update(ppo_batch(trainer))
    trainer.update(ppo_batch(trainer))
    assert all(torch.equal(frozen[n], critic[n]) for n in frozen)
    assert any(not torch.equal(adapters[n], critic[n]) for n in adapters if "lora_" in n)
    assert any(not torch.equal(policy_adapters[n], policy[n]) for n in policy_adapters)
    assert all("lora_" in n for n in trainer.state()["critic"] if not n.startswith("head."))  # no copy of the base in checkpoints


def test_resume_reproduces_the_uninterrupted_run_with_the_separate_critic(tmp_path):
    """A PPO run stopped after step 1 and resumed from its checkpoint: step 2's metrics, the
    policy, the critic and both optimizers' states equal those of a run never stopped."""
    common = dict(algorithm="ppo", n=1, value_warmup_steps=3, warmup_steps=2, ppo_epochs=2, mini_batches=2)
    Trainer(tiny_args(tmp_path, out=str(tmp_path / "stopped"), total_steps=1, **common)).train()
    resumed = Trainer(tiny_args(tmp_path, out=str(tmp_path / "stopped"), total_steps=2, **common))
    resumed_rows = resumed.train()
    straight = Trainer(tiny_args(tmp_path, out=str(tmp_path / "straight"), total_steps=2, **common))
    straight_rows = straight.train()
    assert [r["step"] for r in resumed_rows] == [1 + 1]
    for key in ("reward", "loss", "policy_loss", "value_loss", "grad_norm", "value_grad_norm", "lr", "value_lr"):
        assert resumed_rows[0][key] == straight_rows[-1][key], key
    for a, b in ((resumed.model, straight.model), (resumed.critic, straight.critic)):
        wa, wb = weights(a), weights(b)
        assert all(torch.equal(wa[n], wb[n]) for n in wa)
    sa, sb = resumed.critic_optimizer.state_dict()["state"], straight.critic_optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k][t], sb[k][t]) for k in sa for t in ("exp_avg", "exp_avg_sq"))
    assert resumed.critic_scheduler.state_dict() == straight.critic_scheduler.state_dict()
    # A checkpoint of the shared-head critic does not resume a separate-critic run.
    with pytest.raises(ConfigError, match=r"holds a run with different settings \(changed: critic\)"):
        Trainer(tiny_args(tmp_path, out=str(tmp_path / "straight"), total_steps=3, critic="shared-head", **common)).train()


def test_the_critic_has_its_own_warmup_and_ratios_are_fractions_of_the_run(tmp_path):
    trainer = built(tmp_path, algorithm="ppo", n=1, total_steps=10, mini_batches=2, lr=1e-3, value_lr=1e-2, warmup_ratio=0.25, value_warmup_ratio=0.1)
    # 10 steps * 2 mini-batches = 20 optimizer steps: policy warm-up 5, critic warm-up 2.
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(1e-3 / 5)
    assert trainer.critic_scheduler.get_last_lr()[0] == pytest.approx(1e-2 / 2)
    shared = built(tmp_path / "shared", algorithm="ppo", n=1, critic="shared-head", lr=1e-3, value_lr=1e-2, warmup_steps=4, value_warmup_steps=2)
    assert shared.critic_optimizer is None
    assert shared.scheduler.get_last_lr() == [pytest.approx(1e-3 / 4), pytest.approx(1e-2 / 2)]


def test_ppo_presets_use_the_papers_separate_critic_and_aggregations():
    for name, value_warmup, warmup in (("search-r1-ppo", 0.015, 0.285), ("s3", 0.01, 0.0), ("recon", 0.015, 0.285)):
        args = preset(name)
        assert (args.algorithm, args.critic, args.lr, args.value_lr, args.value_clip) == ("ppo", "separate", 1e-6, 1e-5, 0.5), name
        assert (args.gamma, args.lam, args.value_warmup_ratio, args.warmup_ratio) == (1.0, 1.0, value_warmup, warmup), name
    aggregation = {name: preset(name).loss_aggregation for name in PRESETS}
    assert aggregation == {
        "search-r1-ppo": "seq-mean-token-mean", "search-r1-grpo": "seq-mean-token-mean", "recon": "seq-mean-token-mean",
        "r-search": "seq-mean-token-mean", "r1-searcher": "seq-mean-token-mean", "s3": "seq-mean-token-sum",  # s3's Eq. 2 sums
        # The methods after the papers (docs/methods.md): each fork averages over the batch's tokens
        # (core_algos.py's masked_mean: StepSearch's, ZeroSearch's, AutoRefine's and ParallelSearch's).
        "stepsearch": "token-mean", "zerosearch": "token-mean", "autorefine": "token-mean",
        "parallelsearch": "token-mean",
    }
    # R-Search's §4.3 warm-up ratio 0.95; Search-R1's GRPO script's 0.285
    assert preset("r-search").warmup_ratio == 0.95 and preset("search-r1-grpo").warmup_ratio == 0.285
    assert Args().critic == "separate"
    cases = [
        ({"critic": "sepparate"}, "Unknown critic 'sepparate'. Did you mean 'separate'? Expected one of: separate, shared-head."),
        ({"value_warmup_ratio": 1.5}, "Args.value_warmup_ratio expects a fraction of the run's optimizer steps in [0, 1) or None, got 1.5."),
        ({"value_warmup_steps": -1}, "Args.value_warmup_steps expects a non-negative integer, got -1."),
    ]
    for changes, message in cases:
        with pytest.raises(SearchGymError) as e:
            Trainer(Args(algorithm="ppo", n=1, **changes))
        assert str(e.value) == message


@pytest.fixture
def full_float32():
    """float32 matmuls in full float32 on every device: no TF32 (a CUDA default in some
    setups, with a 10-bit mantissa), so that only reduction order separates two runs."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def relative_gradient_errors(got, expected):
    """Per parameter tensor, ||got - expected|| / ||expected|| (in float64)."""
    return {n: float((got[n].double() - expected[n]).norm() / expected[n].norm()) for n in expected if expected[n].norm() > 0}


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_the_micro_batched_update_has_the_gradient_of_search_r1_eq_2_written_out(tmp_path, mode, full_float32):
    """GRPO with seq-mean-token-mean: the gradient the trainer accumulates over micro-batches of
    one sequence equals that of Search-R1's Eq. 2 on the whole batch, 1/G sum_i 1/|y_i| sum_t
    ratio_it * A_i (ratio 1 at the old policy, no clipping, no KL); token-mean's does not.

    Eq. 2 is written out in float64 on a float64 copy of the model: the exact gradient, up to
    float64 rounding. The trainer's float32 one differs from it by float32 rounding only, in
    an order that depends on the device's kernels (micro-batches of one row, batch of two),
    so it is compared per parameter tensor by norm, within float32's epsilon times the
    number of terms of the longest sums (the vocabulary's logits, and the hidden units of
    each layer): element by element, a near-zero gradient entry made of cancelling terms
    has no meaningful relative error. token-mean's gradient must miss by far more."""
    import copy

    trainer = built(tmp_path, algorithm="grpo", lr=1e-3, micro_batch_size=1, loss_aggregation=mode, max_grad_norm=1e9)  # no clipping of the grads
    samples = [result(sampled(trainer, PROMPT, GOOD), 1.0, 0), result(sampled(trainer, PROMPT, BAD[:2], [60, 61]), 0.0, 0)]
    model = trainer.model
    batch = collate([s.trajectory for s in samples]).to(trainer.device)
    advantages = group_advantages(torch.tensor([1.0, 0.0]), [0, 0]).to(trainer.device, torch.float64)  # [G]
    exact = copy.deepcopy(model).double()
    logits = exact(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits[:, :-1]  # [G, L-1, V]
    lp = torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)  # [G, L-1]
    ratio = torch.exp(lp - lp.detach())  # [G, L-1]
    m = batch.loss_mask.double()  # [G, L-1]
    per_sequence = -(ratio * advantages[:, None] * m).sum(-1) / m.sum(-1)  # [G]
    per_sequence.mean().backward()
    expected = {n: p.grad.detach().clone() for n, p in exact.named_parameters()}
    model.zero_grad()
    trainer.update(samples)
    errors = relative_gradient_errors({n: p.grad for n, p in model.named_parameters()}, expected)
    assert len(errors) == len(expected)  # every tensor has a gradient to compare
    config = model.config
    tolerance = torch.finfo(torch.float32).eps * (config.vocab_size + config.hidden_size * config.num_hidden_layers)
    if mode == "seq-mean-token-mean":
        assert max(errors.values()) <= tolerance, (max(errors, key=errors.get), max(errors.values()), tolerance)
    else:
        # Averaging over all tokens weighs the 4-token and the 2-token answers otherwise: far off Eq. 2.
        assert max(errors.values()) > 100 * tolerance, (max(errors.values()), tolerance)
