"""A fake OpenAI-compatible ``/v1/completions`` server whose replies take as long as the
tokens they hold: a stand-in for a GPU server (vLLM's) that serves requests side by side.

Run as its own process (``python benchmarks/paced_server.py LOG TOKENIZER [--per-token S]
[--base S] [--lengths MIN MAX] [--max-model-len N]``): it prints its port, then serves
until killed. TOKENIZER is a folder holding a Hugging Face ``tokenizer.json``; prompts
come as text or token ids of it, replies go back as vLLM's exact token ids
(``token_id:<n>``).

It plays Search-R1's tag games like a fixed policy. Each question has a plan, a function of
its text only (:func:`plan`): how many searches (0 to 3) before the answer and how many
tokens each turn writes (``--lengths``, uniform). A turn writes ``<think>`` filler up to
its length, then ``<search> the question </search>``, or once the searches are done
``<answer> the first title of the last results </answer>``; a reply longer than the
request's ``max_tokens`` is cut there (``finish_reason: length``). So episodes differ in
turn counts and turn lengths, and the same episode is played the same however it is sent.

A request is answered after ``base + per_token x`` the longest reply it holds (a batch
ends with its longest row; concurrent requests do not slow each other). A prompt longer
than ``--max-model-len`` tokens gets vLLM's HTTP 400 ("This model's maximum context length
is ..."). Every request appends one JSON line to LOG when it is answered: ``start`` and
``end`` (``time.monotonic()``), ``questions``, ``turns`` and ``tokens`` per prompt.
"""

import argparse
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

QUESTION = re.compile(r"Question: ([^\n<]*)")
TITLE = re.compile(r"\(Title: ([^)]*)\)")
#: Most searches a plan holds.
MAX_SEARCHES = 3


def plan(question, lengths=(8, 64)):
    """(searches, tokens of each turn) for ``question``: a function of its text only."""
    digest = hashlib.blake2b(question.encode(), digest_size=16).digest()
    searches = digest[0] % (MAX_SEARCHES + 1)
    low, high = lengths
    return searches, [low + digest[1 + t] % (high - low + 1) for t in range(searches + 1)]


class Player:
    """Writes each prompt's turn as token ids of the tokenizer."""

    def __init__(self, tokenizer_folder, lengths):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(os.path.join(tokenizer_folder, "tokenizer.json"))
        self.lengths = lengths
        self.filler = self.encode(" step")

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def turn(self, prompt):
        """(question, turn, ids of the reply, the stop string it ends with)."""
        text = prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt, skip_special_tokens=False)
        found = QUESTION.search(text)
        question = found.group(1).strip() if found else ""
        after = text[found.end():] if found else text
        turn = after.count("<information>")
        searches, lengths = plan(question, self.lengths)
        if turn < searches:
            action, stop = f"<search> {question} </search>", "</search>"
        else:
            title = TITLE.findall(after.rsplit("<information>", 1)[-1])
            action, stop = f"<answer> {title[0] if title else 'unknown'} </answer>", "</answer>"
        head, tail = self.encode("<think>"), self.encode(" </think>\n" + action)
        want = lengths[min(turn, len(lengths) - 1)]
        fill = max(0, want - len(head) - len(tail))
        ids = head + (self.filler * (fill // max(len(self.filler), 1) + 1))[:fill] + tail
        return question, turn, ids, stop


def completion(player, body, per_token, base):
    prompts = body["prompt"]
    if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
        prompts = [prompts]
    limit = int(body.get("max_tokens") or 16)
    choices, questions, turns, tokens = [], [], [], []
    for index, prompt in enumerate(prompts):
        question, turn, ids, stop = player.turn(prompt)
        finish, matched = "stop", stop if stop in body.get("stop", []) else None
        if len(ids) > limit:
            ids, finish, matched = ids[:limit], "length", None
        choices.append({
            "index": index, "text": player.tokenizer.decode(ids, skip_special_tokens=False), "finish_reason": finish,
            "stop_reason": matched, "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids)},
        })
        questions.append(question)
        turns.append(turn)
        tokens.append(len(ids))
    return {"object": "text_completion", "model": body.get("model"), "choices": choices}, base + per_token * max(tokens), \
        {"questions": questions, "turns": turns, "tokens": tokens}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("log")
    parser.add_argument("tokenizer")
    parser.add_argument("--per-token", type=float, default=0.01, help="seconds per token of the longest reply of a request")
    parser.add_argument("--base", type=float, default=0.0, help="seconds every request takes besides its tokens")
    parser.add_argument("--lengths", type=int, nargs=2, default=[8, 64], metavar=("MIN", "MAX"), help="tokens of a turn")
    parser.add_argument("--max-model-len", type=int, default=1 << 20, help="longest prompt in tokens")
    args = parser.parse_args()
    player = Player(args.tokenizer, tuple(args.lengths))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            start = time.monotonic()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/completions":
                return self.answer(404, {"error": {"message": f"no route {self.path}"}})
            prompts = body["prompt"] if isinstance(body["prompt"], list) and body["prompt"] and not isinstance(body["prompt"][0], int) else [body["prompt"]]
            longest = max(len(p) if not isinstance(p, str) else len(player.encode(p)) for p in prompts)
            if longest > args.max_model_len:
                return self.answer(400, {"error": {"message": (
                    f"This model's maximum context length is {args.max_model_len} tokens. However, your request has "
                    f"{longest} input tokens. Please reduce the length of the input messages."), "type": "BadRequestError"}})
            reply, seconds, record = completion(player, body, args.per_token, args.base)
            time.sleep(max(0.0, start + seconds - time.monotonic()))
            with lock, open(args.log, "a") as log:
                log.write(json.dumps({"start": start, "end": time.monotonic(), **record}) + "\n")
            self.answer(200, reply)

        def answer(self, status, payload):
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (its deadline)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 1024
    print(server.server_port, flush=True)
    server.serve_forever()


class Running:
    """A started server: ``url`` (the API root) and :meth:`requests` (its log)."""

    def __init__(self, url, log_path):
        self.url, self.log_path = url, log_path

    def requests(self):
        """Every request answered so far, in the order they were answered."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as log:
            return [json.loads(line) for line in log]

    def clear(self):
        if os.path.exists(self.log_path):
            os.remove(self.log_path)


@contextlib.contextmanager
def running(folder, tokenizer_folder, *options):
    """Start the server as a process on 127.0.0.1 (logging to ``folder``); stop it after.
    ``options`` are its command-line options (``"--per-token", "0.02"``...)."""
    log_path = os.path.join(folder, "paced-requests.jsonl")
    process = subprocess.Popen([sys.executable, __file__, log_path, str(tokenizer_folder), *map(str, options)],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the paced server did not start (exit code {process.wait(30)})")
        yield Running(f"http://127.0.0.1:{int(line)}/v1", log_path)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
