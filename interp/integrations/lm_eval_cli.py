"""`interp-lm-eval`: lm-evaluation-harness's command line with the `interp` model registered.

The console script points here, not at lm_eval_model (which imports lm_eval on its first
line), so that an install without the `lm-eval` extra gets one line and exit code 2.
"""

from __future__ import annotations

import sys

from interp.core.errors import InterpError
from interp.core.extras import require_extra


def main() -> None:
    try:
        require_extra("lm-eval", "interp-lm-eval")
    except InterpError as exc:
        print(f"interp-lm-eval: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    from interp.integrations.lm_eval_model import cli

    cli()
