"""Train searchgym envs with verl (``make install-verl`` gives verl its own ``.venv-verl``).

- :mod:`.agent_loop`: the agent loop verl runs per dataset row (registered as ``"searchgym"``;
  importing it needs verl).
- :mod:`.data`: searchgym datasets as verl's parquet rows, and rows (searchgym's or
  Search-R1's processed parquet) back to :class:`~searchgym.corpora.types.QAExample`.
- :mod:`.server`: a searchgym language model behind verl's rollout-server interface (CPU
  checks of the whole loop without a GPU).
- ``python -m searchgym.integrations.verl prepare --env searchgym/SearchR1-v0 --out data/``
  writes ``train.parquet`` and ``test.parquet``; ``search_r1.yaml`` and
  ``agent_loop.yaml`` beside this file configure a Search-R1 run (docs/verl.md).
"""

from searchgym.integrations.verl.data import example_from_row, read_examples, verl_rows, write_parquet

__all__ = ["example_from_row", "read_examples", "verl_rows", "write_parquet"]
