"""PPO's critic: a value model of its own (the papers'), or a head on the policy (cheaper).

- ``separate`` (Search-R1, s3 and RECON train this): the policy's base transformer copied
  before training, with a scalar value head on its last hidden state. It has its own
  optimizer, learning rate and warm-up (the trainer's), and the value loss never reaches
  the policy: the critic shares no trained tensor with it. Full fine-tuning copies every
  weight (a second model, its gradients and its AdamW state: about twice the training
  memory). In LoRA runs the critic gets its own adapters (same rank, alpha and targets) over
  the base weights, which are frozen in both models and held once in memory; only its
  adapters and value head train.
- ``shared-head``: a zero-initialised linear layer on the policy's last hidden state,
  trained by the policy's optimizer: the value loss flows into the policy's weights.

Both give values ``[B, L-1]`` on targets (:mod:`searchgym.training.batch`): column ``j``
is the value of the context that predicts ``input_ids[:, j+1]``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from searchgym.error import ConfigError, require
from searchgym.training.args import CRITICS

torch = require("torch", extra="lm", feature="Training")


class SharedHeadCritic(torch.nn.Module):
    """A linear value head on the policy's last hidden state (trained with the policy)."""

    needs_policy_hidden = True

    def __init__(self, hidden_size: int):
        super().__init__()
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def values(self, batch: Any, hidden: Any) -> Any:
        """[b, w] values from the policy's hidden states [b, w, H] of ``batch``."""
        return self.head(hidden.float()).squeeze(-1)  # [b, w]


class SeparateCritic(torch.nn.Module):
    """A value model: a transformer backbone and a scalar head on its last hidden state."""

    needs_policy_hidden = False

    def __init__(self, backbone: Any, hidden_size: int, *, init_std: float = 0.02):
        super().__init__()
        self.backbone = backbone
        # A small random head (as a token-classification head starts), not zeros: with a zero
        # head the backbone would get no gradient until the head had moved.
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.normal_(self.head.weight, std=init_std)
        torch.nn.init.zeros_(self.head.bias)

    def values(self, batch: Any, hidden: Any = None) -> Any:
        """[b, w] values of ``batch`` (a :class:`~searchgym.training.batch.TokenBatch`)."""
        out = self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
        return self.head(out.last_hidden_state[:, :-1].float()).squeeze(-1)  # [b, L, H] -> [b, w]


def build_critic(
    kind: str, model: Any, *, seed: int, lora_rank: int = 0, lora_alpha: float = 32.0, lora_targets: Sequence[str] = (),
) -> Any:
    """The critic ``kind`` for ``model`` (the policy before any LoRA adapter is added), on its
    device. Its random initialisation is seeded by ``seed`` and leaves the global RNGs as
    they were, so adding a critic does not change the rest of the run's random draws."""
    if kind not in CRITICS:
        raise ConfigError(f"Unknown critic {kind!r}; expected one of: {', '.join(CRITICS)}.")
    hidden_size = int(model.config.hidden_size)
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "shared-head":
            return SharedHeadCritic(hidden_size).to(device)
        base = getattr(model, "base_model", None)
        if base is None or base is model or not hasattr(base, "forward"):
            raise ConfigError(
                f"critic='separate' needs a transformers causal LM with a base model to copy; {type(model).__name__} has none. "
                "Use critic='shared-head'."
            )
        if lora_rank:
            # Share the frozen base weights with the policy (one copy in memory): the
            # deep copy maps every parameter to itself, then adapters go on the copy's modules.
            backbone = copy.deepcopy(base, memo={id(p): p for p in base.parameters()})
            peft = require("peft", extra="train", feature="LoRA training")
            config = peft.LoraConfig(r=lora_rank, lora_alpha=lora_alpha, target_modules=list(lora_targets), lora_dropout=0.0, bias="none")
            backbone = peft.inject_adapter_in_model(config, backbone)
            for name, p in backbone.named_parameters():
                p.requires_grad_("lora_" in name)
        else:
            backbone = copy.deepcopy(base)
            backbone.requires_grad_(True)
        critic = SeparateCritic(backbone, hidden_size, init_std=float(getattr(model.config, "initializer_range", 0.02)))
        return critic.to(device).float()


def trainable_state(module: Any) -> dict[str, Any]:
    """Copies of the trained tensors of ``module`` by name (a LoRA critic's shared base weights are not)."""
    return {n: p.detach().clone() for n, p in module.named_parameters() if p.requires_grad}


def load_trainable_state(module: Any, state: dict[str, Any], *, what: str) -> None:
    """Copy :func:`trainable_state`'s tensors back into ``module``."""
    params = dict(module.named_parameters())
    missing = sorted(n for n, p in params.items() if p.requires_grad and n not in state)
    if missing:
        raise ConfigError(f"The checkpoint does not match the {what}: no weights for {missing[:3]}...; was it written with other critic or LoRA settings?")
    with torch.no_grad():
        for name, tensor in state.items():
            params[name].copy_(tensor)
