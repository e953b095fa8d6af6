from fuzz.export.script import main
import sys

sys.exit(main())
