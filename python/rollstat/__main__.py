"""`python -m rollstat …` is the `rollstat` command."""

import sys

from ._cli import main

sys.exit(main())
