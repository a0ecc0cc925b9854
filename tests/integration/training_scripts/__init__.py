"""Helpers of the training integration tests: a tiny model, its data, and hand-written DDP
references to compare ddpkit's runs against (importable by spawned ranks)."""
