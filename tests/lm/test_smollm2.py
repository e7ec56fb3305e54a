"""The packaged SmolLM2-135M-Instruct: converted once from its GGUF file, then loaded."""

import pytest

from searchgym.lm.hf import TransformersLM
from searchgym.lm.models import smollm2_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SEARCHGYM_CACHE", str(tmp_path_factory.mktemp("cache")))
    folder = smollm2_folder()
    yield folder, TransformersLM("smollm2", device="cpu")
    mp.undo()


def test_conversion_writes_one_complete_folder_and_is_reused(smollm2):
    folder, _ = smollm2
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".smollm2-")]  # no temp folder left
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert smollm2_folder() == folder and (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_smollm2_answers_a_simple_question(smollm2):
    _, lm = smollm2
    prompt = lm.apply_chat([{"role": "user", "content": "What is the capital of France? Answer in one word."}])
    (generation,) = lm.generate([prompt], max_new_tokens=16, temperature=0.0)
    assert "Paris" in generation.text and generation.finish_reason == "stop"
    assert len(generation.token_ids) == len(generation.logprobs) > 0
