"""A :class:`LanguageModel` served elsewhere, through an OpenAI-compatible API.

Meant for frozen models (the s3 generator, the R-Search reader, a judge) running on a
vLLM server or at any provider, and for chat models playing a game through their own
function calling (:meth:`OpenAILM.chat`: ``/chat/completions`` with ``tools``, one request
per conversation, the reply's ``tool_calls`` checked and handed back as the assistant
message an env with ``action_format="tools"`` plays). All prompts of one call go in one ``/completions``
request, except seeded sampling (a request carries one seed, so each prompt then goes in
a request of its own with its seed, up to 8 in flight at once) and a call mixing text and
token-id prompts (one request each). Against vLLM the reply carries the exact sampled
token ids (``return_tokens_as_token_ids``) and keeps the stop string in the text
(``include_stop_str_in_output``); other servers ignore those fields, and then the stop
string is appended when the server says which one matched (or, for a server that sends
no ``stop_reason``, when only one was given), and token ids come from re-tokenizing the
text (their logprobs are NaN when the counts differ). A ``max_new_tokens`` the server
refuses as above the model's length is capped to that length and the request sent again
(at most twice: a server that keeps naming lower caps is an error).

What the server may do is bounded, so that a broken or hostile server costs a call at most
``timeout`` seconds per attempt and never an exception other than
:class:`~searchgym.error.BackendError`:

* One deadline per request: ``timeout`` covers connecting, sending, the status line and
  headers and the whole body together (a server that trickles bytes is cut off at it), and
  a body larger than ``max_response_bytes`` is refused.
* Only HTTP 2xx is an answer. A redirect is not followed: it is an error naming where the
  server points, so that ``base_url`` can be set to it.
* Every field of a reply is checked: as many choices as prompts, their indices each of
  ``0..n-1`` once, ``text`` a string, ``finish_reason`` and ``stop_reason`` of the types the
  API defines, ``logprobs`` an object whose ``tokens`` are strings (vLLM's ``token_id:<n>``
  form in all of them or none) and whose ``token_logprobs`` are numbers <= 0 or null, as
  many as the tokens. In a chat reply: one choice whose message has a string or null
  ``content`` and at most ``max_tool_calls`` tool calls, each with a distinct non-empty
  ``id``, a non-empty ``name`` (ids and names at most 256 characters) and ``arguments`` as
  a string; ``usage`` counts are integers >= 0 (:func:`searchgym.lm.replies.chat_reply`).
  The error names the URL and the field.

Connection errors, timeouts and HTTP 408, 409, 429, 500, 502, 503 and 504 are retried
with exponential backoff; anything else, and every failure after the last retry, raises
:class:`~searchgym.error.BackendError` with the server's own message. A request the server
has not answered after ``SEARCHGYM_WAIT_SECONDS`` (default 10) says so on stderr, and again
every three times that (:class:`searchgym.progress.waiting`): ``waiting for the model server
at URL/completions (attempt 2 of 4, 60 s timeout): 10 s without an answer``.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from searchgym.error import BackendError, ConfigError, require
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, check_sampling_params
from searchgym.lm.replies import ChatReply, Malformed, chat_reply, check_choices, check_field, check_logprobs, check_tools, describe, openai_messages
from searchgym.progress import waiting

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# Messages of a prompt that does not fit (vLLM: "This model's maximum context length is N
# tokens. However, your prompt contains ..."; a prompt of exactly N tokens leaves no room:
# "max_tokens must be at least 1").
_TOO_LONG = ("maximum context length", "context length", "too long", "maximum model length", "max_tokens must be at least 1")
# vLLM refuses a max_tokens above the model's length ("max_tokens=1000 cannot be greater than
# max_model_len=512"): the request is retried with that many tokens, as the local backends cap it.
_MAX_TOKENS_CAP = re.compile(r"max_tokens=\d+ cannot be greater than \w+=(\d{1,12})")
# Requests one call may send for one batch while the server names caps on max_tokens: the
# first and one capped retry are what a vLLM server needs; a third covers a second, lower
# cap. A server that still refuses is answering something other than its length.
_MAX_TOKENS_ROUNDS = 3
# vLLM's form of a sampled token ("token_id:1234"), with return_tokens_as_token_ids.
_TOKEN_ID = re.compile(r"token_id:(0|[1-9][0-9]{0,11})")
_TOKEN_ID_FORM = '"token_id:<n>" with n a token id (vLLM\'s form, in every token or in none)'


class OpenAILM(LanguageModel):
    """Completions from an OpenAI-compatible server.

    Args:
        model: The served model's name (vLLM: the ``--model`` or ``--served-model-name``).
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: Bearer token; default ``$OPENAI_API_KEY`` or ``"EMPTY"`` (vLLM needs none).
        tokenizer: A Hugging Face tokenizer for token-id prompts, chat templates and
            re-tokenizing replies. By default one is loaded offline for ``model`` if
            possible; without one, only text prompts work.
        timeout: Seconds one attempt of a request may take in all: connecting, sending,
            and receiving the headers and the whole body.
        max_retries: Retries after the first attempt of a retryable failure.
        backoff: Seconds before the first retry, doubled each time.
        max_batch_size: Most prompts per request (larger calls are split).
        max_response_bytes: Largest reply body accepted (default 256 MiB).
        max_tool_calls: Most tool calls one chat reply may carry (:meth:`chat`); more is
            a malformed reply. An env answers a turn's calls past its own cap (8) as bad
            calls: this bound is against a server gone wrong, not a model.
        max_connections: Most connections open to the server at once, over all the
            threads calling this model (``run_episodes(mode="async")`` sends one request
            per live episode); a request past them waits for one, within its ``timeout``.

    The proxy settings of the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``) apply as for any HTTP client.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        tokenizer: Any = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_batch_size: int = 64,
        max_response_bytes: int = 256 << 20,
        max_tool_calls: int = 64,
        max_connections: int = 256,
    ):
        httpcore = require("httpcore", extra="http", feature="OpenAILM")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"OpenAILM expects the served model's name, got {model!r}.")
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"OpenAILM expects base_url to be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}.")
        for name, value, low in (("timeout", timeout, "> 0"), ("backoff", backoff, ">= 0")):
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            if not number or not math.isfinite(value) or value < 0 or (value == 0 and low == "> 0"):
                raise ConfigError(f"OpenAILM expects {name} to be a finite number {low}, got {value!r}.")
        integers = (("max_retries", max_retries, 0), ("max_batch_size", max_batch_size, 1),
                    ("max_response_bytes", max_response_bytes, 1), ("max_tool_calls", max_tool_calls, 1),
                    ("max_connections", max_connections, 1))
        for name, value, low in integers:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"OpenAILM expects {name} to be an integer >= {low}, got {value!r}.")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout, self.max_retries, self.backoff, self.max_batch_size = float(timeout), max_retries, float(backoff), max_batch_size
        self.max_response_bytes, self.max_tool_calls, self.max_connections = max_response_bytes, max_tool_calls, max_connections
        self.tokenizer = tokenizer if tokenizer is not None else _try_tokenizer(model)
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        host = parts.netloc.rpartition("@")[2]
        self._headers = [("Host", host), ("Authorization", f"Bearer {key}"), ("Content-Type", "application/json"),
                         ("Accept", "application/json"), ("User-Agent", "searchgym")]
        self._httpcore = httpcore
        self._pool = httpcore.ConnectionPool(
            max_connections=max_connections, network_backend=_DeadlineBackend(httpcore), proxy=_proxy(httpcore, parts),
        )
        #: The most attempts any request of the last ``generate`` call made (1 when all
        #: succeeded at once; seeded sampling sends several requests concurrently).
        self.last_attempts = 0
        self._attempts_lock = threading.Lock()

    def _prompt_ids(self, prompt: Any, index: int) -> Any:
        # Text goes to the server as text; token ids need no tokenizer (vLLM accepts them).
        if isinstance(prompt, str):
            if not prompt:
                raise ConfigError(f"LanguageModel.generate expects non-empty prompts, got an empty prompt at index {index}.")
            return prompt
        return super()._prompt_ids(prompt, index)

    #: Most per-prompt requests one call sends at once (seeded sampling, chat conversations).
    max_concurrent = 8
    #: The server answers requests from several threads side by side (it batches them).
    concurrent = True

    def _generate(self, prompt_ids: list[Any], params: SamplingParams) -> list[Generation]:
        self.last_attempts = 0
        if params.seed is not None and params.temperature > 0 and len(prompt_ids) > 1:
            # One request carries one seed: each prompt goes alone, with its own.
            single = [([ids], replace(params, seed=(seed,))) for ids, seed in zip(prompt_ids, params.seed)]
            with ThreadPoolExecutor(min(self.max_concurrent, len(single))) as pool:
                return [g for gs in pool.map(lambda request: self._batch(*request), single) for g in gs]
        if params.temperature == 0:
            params = replace(params, seed=None)  # greedy: nothing to seed
        out: list[Generation] = []
        for start in range(0, len(prompt_ids), self.max_batch_size):
            out.extend(self._batch(prompt_ids[start : start + self.max_batch_size], params))
        return out

    def _batch(self, prompts: list[Any], params: SamplingParams) -> list[Generation]:
        body = {
            "model": self.model,
            "prompt": prompts if len(prompts) > 1 else prompts[0],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": 1,
            "include_stop_str_in_output": True,
            "return_tokens_as_token_ids": True,
        }
        if params.top_k:  # not an OpenAI field: sent only when set (vLLM and llama.cpp servers take it)
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:  # one prompt (see _generate)
            body["seed"] = params.seed[0]
        if len({isinstance(p, str) for p in prompts}) > 1:
            # Servers take a list of texts or a list of id lists, not both: one request each.
            return [g for p in prompts for g in self._batch([p], params)]
        try:
            reply = self._post_capped("/completions", body)
        except _TooLong:
            if len(prompts) == 1:
                return [Generation("", (), (), "prompt_too_long")]
            return [g for p in prompts for g in self._batch([p], params)]  # find which prompt does not fit
        return self._parse(reply, len(prompts), params)

    # ------------------------------------------------------------------ chat completions
    def chat(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | Sequence[int] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> list[ChatReply]:
        """One ``/chat/completions`` reply per conversation, through the server's function
        calling when ``tools`` are given.

        Args:
            conversations: Chat messages per conversation, as an env's ``info["messages"]``
                holds them (tool-call arguments as dicts or JSON text: they are sent as
                JSON text, see :func:`~searchgym.lm.replies.openai_messages`).
            tools: OpenAI function schemas (an env's ``info["tools"]``), sent as ``tools``.
            tool_choice: ``"auto"``, ``"none"``, ``"required"`` or a named function; None
                sends none (the API's default: ``"auto"`` when tools are given).
            max_new_tokens, temperature, top_p: Sampling, as in :meth:`generate`.
            seed: One seed per conversation, or an integer ``s`` meaning ``s, s + 1, ...``;
                sent at temperatures above 0.
            extra_body: More fields of every request, e.g. vLLM's
                ``{"chat_template_kwargs": {"enable_thinking": False}}`` or
                ``{"structured_outputs": {...}}`` (not ``model``, ``messages`` or ``tools``).

        Returns:
            One :class:`~searchgym.lm.replies.ChatReply` per conversation, in order: its
            ``message`` is the assistant message an env with ``action_format="tools"``
            takes as the action. A conversation that does not fit the model gets a reply
            with ``finish_reason="prompt_too_long"``.

        Each conversation is one request (up to :attr:`max_concurrent` in flight), with the
        hardening of every request: one deadline per attempt, bounded retries, and every
        field of the reply checked (:func:`~searchgym.lm.replies.chat_reply`: a tool call
        with no id, a name that is not a string, arguments that are not a string, more than
        ``max_tool_calls`` calls... are a :class:`~searchgym.error.BackendError`).
        """
        if isinstance(conversations, (str, bytes, Mapping)) or not isinstance(conversations, Sequence):
            raise ConfigError(f"OpenAILM.chat expects a list of conversations (each a list of messages), got {type(conversations).__name__}.")
        sent = [openai_messages(c, f"OpenAILM.chat (conversation {i})") for i, c in enumerate(conversations)]
        params = check_sampling_params(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=(), seed=seed, num_prompts=len(sent),
        )
        common: dict[str, Any] = {"model": self.model, "max_tokens": params.max_new_tokens, "temperature": params.temperature, "top_p": params.top_p}
        if tools is not None:
            common["tools"] = check_tools(tools)
        if tool_choice is not None:
            if not (tool_choice in ("auto", "none", "required") or isinstance(tool_choice, Mapping)):
                raise ConfigError(f"OpenAILM.chat expects tool_choice to be 'auto', 'none', 'required', a named function or None, got {tool_choice!r}.")
            common["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)
        if extra_body is not None:
            if not isinstance(extra_body, Mapping) or not all(isinstance(k, str) for k in extra_body):
                raise ConfigError(f"OpenAILM.chat expects extra_body to be a mapping of request fields, got {type(extra_body).__name__}.")
            reserved = sorted({"model", "messages", "tools"} & set(extra_body))
            if reserved:
                raise ConfigError(f"OpenAILM.chat: extra_body may not set {', '.join(reserved)}; pass tools= and the conversations instead.")
            common.update(extra_body)
        bodies = []
        for i, messages in enumerate(sent):
            body = {**common, "messages": messages}
            if params.seed is not None and params.temperature > 0:
                body["seed"] = params.seed[i]
            bodies.append(body)
        self.last_attempts = 0
        if len(bodies) <= 1:
            return [self._chat_one(b) for b in bodies]
        with ThreadPoolExecutor(min(self.max_concurrent, len(bodies))) as pool:
            return list(pool.map(self._chat_one, bodies))

    def _chat_one(self, body: dict[str, Any]) -> ChatReply:
        try:
            reply = self._post_capped("/chat/completions", body)
        except _TooLong:
            return ChatReply.too_long()
        try:
            answer = chat_reply(reply, max_tool_calls=self.max_tool_calls)
        except Malformed as e:
            raise BackendError(
                f"The server at {self.base_url}/chat/completions answered with a malformed chat completion: "
                f"expected {e.field} to be {e.expected}, got {e.got}."
            ) from None
        if answer.completion_tokens is not None and answer.completion_tokens >= body["max_tokens"]:
            # As many tokens as allowed: cut there, whatever the server calls it (vLLM says
            # "tool_calls" for a reply cut after its first complete call).
            answer = replace(answer, finish_reason="length")
        return answer

    def _post_capped(self, path: str, body: dict[str, Any]) -> Any:
        """:meth:`_post`, sending the request again with the ``max_tokens`` cap the server
        names (vLLM: the model's length) when it refuses a larger one; :class:`_TooLong`
        when the prompt does not fit."""
        refused: list[str] = []
        for _ in range(_MAX_TOKENS_ROUNDS):
            try:
                return self._post(path, body)
            except _MaxTokensAbove as e:
                asked = body["max_tokens"]
                if not 0 < e.limit < asked:
                    raise BackendError(f"The server at {self.base_url}{path} refused max_tokens={asked}: {e.message[:200]}") from None
                refused.append(f"{asked} -> {e.limit}")
                body["max_tokens"] = e.limit  # the model's length, as the local backends cap it
        raise BackendError(
            f"The server at {self.base_url}{path} refused max_tokens {len(refused)} times, naming a lower cap each time "
            f"({', '.join(refused)}); expected it to accept the cap it names. Lower max_new_tokens or check the server's --max-model-len."
        )

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        url = self.base_url + path
        data = json.dumps(body).encode("utf-8")
        error = "no attempt"
        attempts = 0
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            with self._attempts_lock:  # requests of one call may run in threads
                self.last_attempts = max(self.last_attempts, attempts)
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:  # a server that hangs is said to be waited on, not silence for timeout x attempts
                with waiting(f"the model server at {url} (attempt {attempts} of {self.max_retries + 1}, {self.timeout:g} s timeout)"):
                    status, headers, content = self._send(url, data)
            except self._httpcore.TimeoutException:
                error = f"timed out after {self.timeout:g} s"
                continue
            except self._httpcore.ConnectError as e:
                error = f"could not connect ({type(e).__name__}: {e})"
                continue
            except (self._httpcore.NetworkError, self._httpcore.ProtocolError) as e:
                error = f"broke off the exchange ({type(e).__name__}: {e})"
                continue
            text = content[:400].decode("utf-8", "replace")
            if status in _RETRY_STATUS:
                error = f"answered HTTP {status}: {text[:200]}"
                continue
            if 300 <= status < 400:
                location = headers.get("location", "nowhere (no Location header)")
                raise BackendError(
                    f"The server at {url} answered HTTP {status}, a redirect to {location[:200]}; redirects are not followed. "
                    "Expected a 2xx answer: set base_url to the server's API root."
                )
            if status >= 400:
                if status == 400:
                    cap = _MAX_TOKENS_CAP.search(text)
                    if cap:
                        raise _MaxTokensAbove(int(cap.group(1)), text)
                    if any(s in text.lower() for s in _TOO_LONG):
                        raise _TooLong(text)
                raise BackendError(f"The server at {url} refused the request with HTTP {status}: {text[:200]}")
            if not 200 <= status < 300:
                raise BackendError(f"The server at {url} answered HTTP {status}; expected a 2xx answer with a JSON body.")
            try:
                return json.loads(content)
            except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep, a number too long
                raise BackendError(f"The server at {url} answered with something that is not JSON: {text[:200]!r}") from None
        raise BackendError(f"The server at {url} {error} ({attempts} attempts); is it running and serving {self.model!r}?")

    def _send(self, url: str, data: bytes) -> tuple[int, dict[str, str], bytes]:
        """One attempt: the status, the headers (lower-case names) and the body, all within
        one deadline of ``timeout`` seconds; a body past ``max_response_bytes`` is an error."""
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), self.timeout)
        _DEADLINE.at = time.monotonic() + self.timeout
        try:
            with self._pool.stream(
                "POST", url, headers=[*self._headers, ("Content-Length", str(len(data)))], content=data,
                extensions={"timeout": timeouts},
            ) as response:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
                chunks, size = [], 0
                for chunk in response.iter_stream():
                    size += len(chunk)
                    if size > self.max_response_bytes:
                        raise BackendError(
                            f"The server at {url} sent a body larger than max_response_bytes={self.max_response_bytes}; "
                            "expected a completion reply (raise max_response_bytes if the replies are really this large)."
                        )
                    chunks.append(chunk)
                return response.status, headers, b"".join(chunks)
        finally:
            _DEADLINE.at = None

    def _parse(self, reply: Any, n: int, params: SamplingParams) -> list[Generation]:
        url = self.base_url + "/completions"
        try:
            choices = check_choices(reply, n)
            return [self._generation(choices[i], f"choices[{i}]", params) for i in range(n)]
        except Malformed as e:
            raise BackendError(f"The server at {url} answered with a malformed completion: expected {e.field} to be {e.expected}, got {e.got}.") from None

    def _generation(self, choice: dict[str, Any], field: str, params: SamplingParams) -> Generation:
        text = check_field(choice, field, "text", (str,), "a string", required=True)
        finish = check_field(choice, field, "finish_reason", (str, type(None)), "a string or null")
        matched = check_field(choice, field, "stop_reason", (str, int, type(None)), "a string, a token id or null")
        reason = "length" if finish == "length" else "stop"
        if reason == "stop" and params.stop and not any(text.endswith(s) for s in params.stop):
            # The server dropped the stop string (the OpenAI API does); put it back.
            if isinstance(matched, str) and matched in params.stop:
                text += matched
            elif len(params.stop) == 1 and "stop_reason" not in choice and finish == "stop":
                # A server that does not say what stopped it (OpenAI): with one stop string,
                # that string. vLLM sends stop_reason, None when the end-of-sequence token
                # ended the text: nothing was cut then.
                text += params.stop[0]
        tokens, values = check_logprobs(choice, field)
        if any(token.startswith("token_id:") for token in tokens):  # vLLM's exact sampled ids: all of them or none
            ids = []
            for i, token in enumerate(tokens):
                match = _TOKEN_ID.fullmatch(token)
                if match is None:
                    raise Malformed(f"{field}.logprobs.tokens[{i}]", _TOKEN_ID_FORM, describe(token))
                ids.append(int(match.group(1)))
            token_ids = tuple(ids)
        elif self.tokenizer is not None:
            token_ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
        else:
            token_ids = ()
        if values is not None and len(values) == len(token_ids):
            lps = tuple(float(v) if v is not None else math.nan for v in values)
        else:
            lps = (math.nan,) * len(token_ids)
        return Generation(text, token_ids, lps, reason)

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        return f"OpenAILM(model={self.model!r}, base_url={self.base_url!r})"


# ---------------------------------------------------------------------------- one deadline per request
class _Deadline(threading.local):
    """When the request this thread is sending must be done (``time.monotonic()``), or None."""

    at: float | None = None


_DEADLINE = _Deadline()


def _within_deadline(timeout: float | None, error: type[Exception]) -> float | None:
    # Each socket operation waits at most what is left of the request's deadline, so the
    # deadline holds however the server spreads its bytes.
    at = _DEADLINE.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A connection whose reads and writes end at the deadline of the request using it."""

    def __init__(self, stream: Any, httpcore: Any):
        self._stream, self._httpcore = stream, httpcore

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _within_deadline(timeout, self._httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _within_deadline(timeout, self._httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        tls = self._stream.start_tls(ssl_context, server_hostname, _within_deadline(timeout, self._httpcore.ConnectTimeout))
        return _DeadlineStream(tls, self._httpcore)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's synchronous network backend with every wait cut at the request's deadline."""

    def __init__(self, httpcore: Any):
        self._backend, self._httpcore = httpcore.SyncBackend(), httpcore

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None) -> Any:
        timeout = _within_deadline(timeout, self._httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, timeout, local_address, socket_options), self._httpcore)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        timeout = _within_deadline(timeout, self._httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, timeout, socket_options), self._httpcore)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _proxy(httpcore: Any, parts: Any) -> Any:
    """The proxy the environment names for this URL (``HTTPS_PROXY`` ...), unless ``NO_PROXY`` exempts it."""
    proxies = urllib.request.getproxies()
    url = proxies.get(parts.scheme) or proxies.get("all")
    if not url or urllib.request.proxy_bypass(parts.hostname):
        return None
    return httpcore.Proxy(url)


class _TooLong(Exception):
    """The server said the prompt does not fit the model's context."""


class _MaxTokensAbove(Exception):
    """The server refused ``max_tokens`` above ``limit`` (the model's length)."""

    def __init__(self, limit: int, message: str):
        super().__init__(message)
        self.limit = limit
        self.message = message


def _try_tokenizer(model: str) -> Any:
    try:
        from searchgym.lm.vllm import model_folder

        transformers = require("transformers", extra="lm", feature="OpenAILM tokenizer")
        return transformers.AutoTokenizer.from_pretrained(model_folder(model), local_files_only=True)
    except Exception:  # no local tokenizer: text prompts still work
        return None
