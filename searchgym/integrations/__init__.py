"""Adapters that let other training engines drive searchgym envs (TRL, verl).

This package sits at the edge of the library: nothing inside ``searchgym`` imports it,
and each module needs its engine's optional extra (``searchgym[trl]``, the verl
environment of ``make install-verl``).
"""
