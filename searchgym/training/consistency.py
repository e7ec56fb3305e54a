"""Do the rollout's logprobs match what the training model computes for the same ids?

The most reported bug of multi-turn RL for LLMs is a trajectory whose tokens or mask do
not line up with what the engine sampled (text decoded and re-tokenized differently, an
observation counted as generated, an off-by-one). Recomputing the logprob of every
generated token with the training model and comparing it with the logprob the engine
recorded catches all of them: the two agree to rounding only when ids, positions and
mask are right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError


@dataclass(frozen=True)
class LogprobReport:
    """The comparison over every generated token of the checked trajectories."""

    num_tokens: int
    max_abs_diff: float
    mean_abs_diff: float
    #: (trajectory index, response position) of the largest difference.
    worst: tuple[int, int]
    atol: float

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.atol

    def __str__(self) -> str:
        verdict = "consistent" if self.ok else "INCONSISTENT"
        return (
            f"{verdict}: {self.num_tokens} generated tokens, max |diff| {self.max_abs_diff:.2e} at trajectory "
            f"{self.worst[0]} position {self.worst[1]}, mean {self.mean_abs_diff:.2e} (atol {self.atol:g})"
        )


def recompute_logprobs(model: Any, trajectory: Any, *, temperature: float = 1.0) -> Any:
    """Logprob of every response id of ``trajectory`` under ``model`` [T] (float32).

    ``temperature`` divides the logits as the sampler did (use 1.0 for greedy rollouts,
    whose recorded logprobs are the model's own log-softmax).
    """
    import torch

    ids = trajectory.context_ids()
    if not trajectory.segments:
        raise ConfigError("recompute_logprobs expects a trajectory with at least one response segment, got none.")
    device = next(model.parameters()).device
    input_ids = torch.tensor([ids], device=device)  # [1, L]
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0, :-1].float()  # [L-1, V]: position i predicts ids[i+1]
    logp = torch.log_softmax(logits / temperature, dim=-1)  # [L-1, V]
    targets = input_ids[0, 1:]  # [L-1]
    picked = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [L-1]
    return picked[len(trajectory.prompt_ids) - 1 :].cpu()  # [T]


def check_logprobs(model: Any, trajectories: Sequence[Any], *, temperature: float = 1.0, atol: float = 1e-3) -> LogprobReport:
    """Compare recorded and recomputed logprobs on every generated (``loss_mask`` 1) token.

    ``temperature``: the rollout's sampling temperature (0 is treated as 1: greedy
    rollouts record the model's log-softmax). Rollouts sampled with top-p < 1 record
    logprobs under the truncated distribution and should be checked at top-p 1.
    """
    import torch

    temperature = 1.0 if temperature == 0 else float(temperature)
    diffs, where = [], []
    for i, trajectory in enumerate(trajectories):
        recorded = trajectory.response_logprobs
        mask = trajectory.loss_mask
        recomputed = recompute_logprobs(model, trajectory, temperature=temperature)
        for t, (m, r) in enumerate(zip(mask, recorded)):
            if m:
                diffs.append(abs(float(recomputed[t]) - float(r)))
                where.append((i, t))
    if not diffs:
        raise ConfigError("check_logprobs found no generated token in the given trajectories (every loss mask is 0).")
    d = torch.tensor(diffs)
    worst = int(d.argmax())
    return LogprobReport(len(diffs), float(d.max()), float(d.mean()), where[worst], atol)
