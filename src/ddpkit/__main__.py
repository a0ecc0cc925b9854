"""``python -m ddpkit explain ...``"""

from ddpkit.cli import main

raise SystemExit(main())
