"""`python -m jaxplat` runs the `jaxplat` command (as `python -m jaxplat.cli`)."""

import sys

from jaxplat.cli.app import main

sys.exit(main())
