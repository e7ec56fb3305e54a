"""A fake OpenAI-compatible chat-completions server, run as its own process by the tests
(``python tests/chat_server.py LOG``; it prints its port, then serves until killed).

``POST /v1/chat/completions`` appends the request body to LOG (one JSON line) and answers:

- the next reply scripted for the request's model, if any: ``POST /script`` with
  ``{"model": name, "replies": [{"status": 200, "body": <JSON or text>, "delay": seconds}]}``
  queues them (``"body": "@player"`` means the player's own answer);
- for the model ``player``, a player of the search games through tool calls: it searches
  the question, then answers with the title of the first document the search returned
  (:func:`player_turn`; the tests write the same decisions as tag text);
- otherwise HTTP 404.

Every reply the player writes counts its tokens as one per 4 characters (``usage``).
"""

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TITLE = re.compile(r"\(Title: ([^)]*)\)")


def player_turn(messages):
    """The player's (content, calls) for a conversation: search the question, then answer
    with the first title of the last search's results ("unknown" when there is none)."""
    results = [m["content"] for m in messages if m.get("role") == "tool"]
    if not results:
        question = messages[0]["content"].rsplit("Question:", 1)[-1].strip().splitlines()[0]
        return "I need to search.", [("search", {"query": question})]
    title = TITLE.search(results[-1])
    return "", [("answer", {"answer": title.group(1) if title else "unknown"})]


def player_reply(body, number):
    content, calls = player_turn(body["messages"])
    tool_calls = [{"id": f"call_{number}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
                  for i, (name, arguments) in enumerate(calls)]
    prompt = sum(len(json.dumps(m)) for m in body["messages"]) // 4
    return {
        "id": f"chatcmpl-{number}", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(json.dumps(tool_calls) + content) // 4},
    }


def main(log_path):
    scripts, lock, counter = {}, threading.Lock(), [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/script":
                with lock:
                    scripts.setdefault(body["model"], []).extend(body["replies"])
                return self.answer(200, {"queued": len(body["replies"])})
            if self.path != "/v1/chat/completions":
                return self.answer(404, {"error": {"message": f"no route {self.path}"}})
            with lock:
                counter[0] += 1
                number = counter[0]
                with open(log_path, "a") as log:
                    log.write(json.dumps(body) + "\n")
                queue = scripts.get(body.get("model"), [])
                reply = queue.pop(0) if queue else None
            if reply is None and body.get("model") != "player":
                return self.answer(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
            reply = reply or {"body": "@player"}
            time.sleep(reply.get("delay", 0))
            payload = player_reply(body, number) if reply["body"] == "@player" else reply["body"]
            self.answer(reply.get("status", 200), payload)

        def answer(self, status, payload):
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
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
    print(server.server_port, flush=True)
    server.serve_forever()


class Running:
    """A started server process: ``url`` (the API root), :meth:`script` and :meth:`requests`."""

    def __init__(self, url, log_path):
        self.url, self.log_path = url, log_path

    def script(self, model, *replies):
        """Queue ``replies`` (dicts of status, body, delay) for ``model``."""
        data = json.dumps({"model": model, "replies": list(replies)}).encode()
        request = urllib.request.Request(self.url.removesuffix("/v1") + "/script", data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def requests(self):
        """Every request body the server received, in order."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as log:
            return [json.loads(line) for line in log]

    def clear(self):
        if os.path.exists(self.log_path):
            os.remove(self.log_path)


@contextlib.contextmanager
def running(folder):
    """Start the server as a process on 127.0.0.1 (logging to ``folder``); stop it after."""
    log_path = os.path.join(folder, "chat-requests.jsonl")
    process = subprocess.Popen([sys.executable, __file__, log_path], stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        yield Running(f"http://127.0.0.1:{port}/v1", log_path)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main(sys.argv[1])
