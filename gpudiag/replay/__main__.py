"""``python -m gpudiag.replay NAME -m MODULE [ARGS...]``: see :mod:`gpudiag.replay.run`."""

import sys

from gpudiag.replay.run import main

sys.exit(main())
