"""``python -m kopf_scheduler.commands``: the ``kopf-scheduler`` command without its console script."""

import sys

from . import main

sys.exit(main())
