import sys

from bon.cli import main

sys.exit(main())
