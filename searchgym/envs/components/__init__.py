"""The env's model components: what condenses retrievals and what scores answers.

- :mod:`~searchgym.envs.components.summarizer_base`, :mod:`~searchgym.envs.components.summarizers`
  and :mod:`~searchgym.envs.components.lm_summarizer`: RECON's slot (identity, extractive,
  a language model with RECON's prompt);
- :mod:`~searchgym.envs.components.frozen` and :mod:`~searchgym.envs.components.lm_frozen`:
  the frozen generator (s3), reader (R-Search) and judge, as callables or language models;
- :mod:`~searchgym.envs.components.model_calls`: how the components' model calls of many
  envs are batched into one ``generate`` per model;
- :mod:`~searchgym.envs.components.question_filters` and
  :mod:`~searchgym.envs.components.filter_cache`: s3's training filter and its verdicts,
  kept per setting;
- :mod:`~searchgym.envs.components.lifetimes`: process-wide values that live as long as the
  objects they were made for (the judge's verdicts, the filter's).
"""
