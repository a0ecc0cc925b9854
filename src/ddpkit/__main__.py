"""``python -m ddpkit explain ...``"""

from ddpkit.cli import console_main

console_main()
