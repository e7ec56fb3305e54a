"""A training step's memory: one long record against the same tokens as segments.

An episode whose context was rewritten (docs/long-horizons.md) trains as several records, each
a row of the batch, instead of one row holding every turn. The step's memory is the policy's
forward and backward over the batch; this measures its peak resident memory in a fresh process
for one row of ``--tokens`` tokens against ``--segments`` rows of ``tokens / segments`` each, on a
small Llama-shaped model with SmolLM2's vocabulary (49,152) and layout (head dim 64), random
weights (the memory does not depend on them), PyTorch's default attention on CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
rows, length, layers = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
config = LlamaConfig(vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=max(length, 2048), tie_word_embeddings=True)
model = LlamaForCausalLM(config)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ids = torch.randint(0, 49152, (rows, length))
out = model(input_ids=ids)
logp = torch.log_softmax(out.logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # [B, T-1]
(-logp.mean()).backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_mb": before / 1024, "peak_mb": peak / 1024}))
"""


def run(rows: int, length: int, layers: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(length), str(layers)], capture_output=True, text=True,
                          timeout=1800)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8192, help="tokens of the episode (default 8,192)")
    parser.add_argument("--segments", type=int, nargs="+", default=[2, 4, 8], help="segment counts to compare (default 2 4 8)")
    parser.add_argument("--layers", type=int, default=4, help="model layers (default 4)")
    parser.add_argument("--quick", action="store_true", help="2,048 tokens, 2 and 4 segments, 2 layers")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.segments, args.layers = 2048, [2, 4], 2
    print(f"a training step's own peak memory (peak RSS - the model loaded), {args.tokens:,} tokens, {args.layers} layers "
          "(hidden 256, vocab 49,152)")
    print("| rows x tokens | all rows in one micro-batch, MB | one row a micro-batch, MB |")
    print("|---|---:|---:|")
    base = None
    for segments in [1, *args.segments]:
        whole = run(segments, args.tokens // segments, args.layers)
        one = run(1, args.tokens // segments, args.layers)
        own, own_one = (m["peak_mb"] - m["before_mb"] for m in (whole, one))
        base = base or own
        label = "1 (one long record)" if segments == 1 else f"{segments} (segments)"
        print(f"| {label} x {args.tokens // segments:,} | {own:,.0f} ({own / base:.2f}x) | {own_one:,.0f} ({own_one / base:.2f}x) |",
              flush=True)


if __name__ == "__main__":
    main()
