"""Native tool calls: each game's tools as function schemas, parsers for the public call
formats, and the surface that turns calls into the game's actions and results into tool
messages (``gym.make(..., action_format="tools")``).

- :mod:`~searchgym.envs.tools.schemas`: the tools and the prompt of each game;
- :mod:`~searchgym.envs.tools.parsers`: hermes, Llama 3 JSON, Mistral, and your own;
- :mod:`~searchgym.envs.tools.messages`: an assistant turn of any shape read into its text and calls;
- :mod:`~searchgym.envs.tools.surface`: :class:`ToolSurface`, the translation layer;
- :mod:`~searchgym.envs.tools.no_call`: a reply without a call that writes a tag grammar, named.
"""
