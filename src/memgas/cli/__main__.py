"""``python -m memgas.cli``: the ``memgas`` command, for environments where its script is not on ``PATH``."""

import sys

from memgas.cli import main

sys.exit(main())
