"""`python -m fuzz.export`: see fuzz.export.script."""
import sys

from fuzz.export.script import main

sys.exit(main())
