import sys

from cortex_kernel.cli import main

sys.exit(main())
