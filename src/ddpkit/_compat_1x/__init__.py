"""Facts about Lightning 1.x that both front-ends read, and no front-end owns: the Trainer
keywords 2.x removed (:mod:`.keywords`) and the 1.x signatures of the optimization hooks
(:mod:`.optimizer_hooks`). Plain data and small functions, below ``ddpkit.trainer`` and
``ddpkit.lightning`` alike; nothing here imports Lightning."""
