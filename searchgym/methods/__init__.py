"""The methods after the five papers, each built as a user would build it (docs/extending.md).

Each module is one method, written on searchgym's public extension points only (reward
recipes that pay each turn, protocols with action kinds of their own, retrievers by shape,
trainer hooks): ``stepsearch`` (StepSearch), ``autorefine`` (AutoRefine), ``zerosearch``
(ZeroSearch) and ``parallelsearch`` (ParallelSearch). Their env ids
(:data:`searchgym.envs.registration.METHOD_ENV_SPECS`) and training presets name their
pieces by ``module:attr``, so nothing imports this package until a method is used.
docs/methods.md gives each setting with its source.
"""
