import sys

from fuzz.cli.main import main

sys.exit(main())
