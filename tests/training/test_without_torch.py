"""Without torch installed, every Python entry point of the training package raises the
MissingDependencyError the command line prints (the extra and its install command), not a bare
ModuleNotFoundError. torch is refused by a ``sys.meta_path`` finder in a fresh interpreter, so the
real imports of searchgym run and fail as they would where torch is absent."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

REFUSE_TORCH = """
import sys

class RefuseTorch:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, RefuseTorch())
"""

CALLS = """
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
results = {}

def attempt(label, call):
    try:
        call()
    except Exception as e:
        results[label] = [type(e).__module__ + "." + type(e).__name__, str(e)]
    else:
        results[label] = ["no error", ""]

import searchgym.training as training
from searchgym.training.args import Args
from searchgym.training.sft import SFTArgs, sft
from searchgym.training.distill import DistillArgs, distill_summarizer
from searchgym.training.stage_sets import StageSetArgs, stage_sets

attempt("sft", lambda: sft(SFTArgs(model="scratch", out=str(out / "sft"))))
attempt("distill", lambda: distill_summarizer(DistillArgs(out=str(out / "distill"))))
attempt("stage_sets", lambda: stage_sets(StageSetArgs(out=str(out / "stages"), limit=2)))
attempt("Trainer", lambda: training.Trainer(Args(out=str(out / "train"))).train())
results["torch imported"] = "torch" in sys.modules
print(json.dumps(results))
"""


def _hint(feature: str) -> str:
    return (f"{feature} requires the package 'torch', which is not installed. "
            "Install it with: pip install -e '.[lm]' (or run `make install`)")


def test_training_entry_points_without_torch_name_the_extra(tmp_path):
    script = REFUSE_TORCH + CALLS
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    error = "searchgym.error.MissingDependencyError"
    assert results == {
        "sft": [error, _hint("searchgym.training.sft.sft")],
        "distill": [error, _hint("searchgym.training.distill.distill_summarizer")],
        "stage_sets": [error, _hint("TransformersLM")],  # the default model's backend says it first
        "Trainer": [error, _hint("Training")],  # importing the trainer module requires torch
        "torch imported": False,
    }
    assert list(tmp_path.iterdir()) == []  # nothing written before the check


def test_the_refusing_finder_is_what_a_missing_torch_looks_like():
    """The simulation is faithful: a plain ``import torch`` behind it fails as it does without torch."""
    script = REFUSE_TORCH + "\ntry:\n    import torch\nexcept ModuleNotFoundError as e:\n    print(e.name)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "torch", done.stderr
