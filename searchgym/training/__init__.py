"""Token-level RL training: advantages and losses as small pure functions (torch).

Every tensor is ``[B, T]`` over response tokens unless noted; ``loss_mask`` is 1 on
tokens the policy generated and 0 on environment tokens and padding.
"""
