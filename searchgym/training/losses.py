"""Losses of token-level policy optimisation, as small pure functions.

Shapes: ``B`` sequences, ``T`` response tokens; ``mask`` is the loss mask (1 on generated
tokens, 0 on observation tokens and padding). Every function applies the mask; the
aggregation over tokens is explicit (:data:`AGGREGATIONS`).
"""

from __future__ import annotations

from typing import Any

from searchgym.error import ConfigError

#: How per-token losses become one number.
#: - ``token-mean``: mean over every unmasked token of the batch (default; long responses weigh more).
#: - ``seq-mean-token-sum``: sum over each sequence's tokens, mean over sequences.
#: - ``seq-mean-token-mean``: mean over each sequence's tokens, mean over sequences.
AGGREGATIONS = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
#: Estimators of KL(policy || reference) from the sampled token's log-ratio.
KL_ESTIMATORS = ("k1", "k2", "k3")


def aggregate(loss: Any, mask: Any, mode: str = "token-mean") -> Any:
    """One scalar from per-token ``loss`` [B, T] over the tokens where ``mask`` is 1."""
    mask = mask.to(loss.dtype)  # [B, T]
    if mode == "token-mean":
        return (loss * mask).sum() / mask.sum().clamp(min=1.0)
    per_seq = (loss * mask).sum(dim=-1)  # [B]
    if mode == "seq-mean-token-sum":
        return per_seq.mean()
    if mode == "seq-mean-token-mean":
        return (per_seq / mask.sum(dim=-1).clamp(min=1.0)).mean()
    raise ConfigError(f"Unknown loss aggregation {mode!r}; expected one of: {', '.join(AGGREGATIONS)}.")


def policy_loss(
    logprobs: Any,
    old_logprobs: Any,
    advantages: Any,
    mask: Any,
    *,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    mode: str = "token-mean",
) -> tuple[Any, Any]:
    """PPO's clipped surrogate loss and the fraction of tokens where clipping acted.

    ``clip_high`` (default ``clip_low``) allows an asymmetric range (DAPO's clip-higher).
    """
    import torch

    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logprobs - old_logprobs)  # [B, T]
    unclipped = -advantages * ratio  # [B, T]
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # [B, T]
    loss = torch.maximum(unclipped, clipped)  # [B, T]
    clip_fraction = aggregate((clipped > unclipped).to(loss.dtype), mask, "token-mean")
    return aggregate(loss, mask, mode), clip_fraction


def value_loss(values: Any, old_values: Any, returns: Any, mask: Any, *, clip: float | None = 0.2, mode: str = "token-mean") -> Any:
    """PPO's value loss, 0.5 * squared error, with the new value clipped around the old one."""
    import torch

    loss = (values - returns) ** 2  # [B, T]
    if clip is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)  # [B, T]
        loss = torch.maximum(loss, (clipped - returns) ** 2)  # [B, T]
    return 0.5 * aggregate(loss, mask, mode)


def kl_penalty(logprobs: Any, ref_logprobs: Any, estimator: str = "k3") -> Any:
    """Per-token estimate of KL(policy || reference) at the sampled tokens [B, T].

    ``k1``: log-ratio (unbiased, can be negative); ``k2``: half squared log-ratio;
    ``k3``: ``exp(-d) - 1 + d`` with ``d`` the log-ratio (unbiased, always >= 0, low variance).
    """
    import torch

    d = logprobs - ref_logprobs  # [B, T]
    if estimator == "k1":
        return d
    if estimator == "k2":
        return 0.5 * d**2
    if estimator == "k3":
        return torch.exp(-d) - 1.0 + d
    raise ConfigError(f"Unknown KL estimator {estimator!r}; expected one of: {', '.join(KL_ESTIMATORS)}.")


def entropy_from_logits(logits: Any) -> Any:
    """Entropy of each position's next-token distribution: [B, T, V] -> [B, T]."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)  # [B, T, V]
    return -(logp.exp() * logp).sum(dim=-1)  # [B, T]
