"""`python -m jaxplat.cli` runs the `jaxplat` command."""

import sys

from jaxplat.cli.app import main

sys.exit(main())
