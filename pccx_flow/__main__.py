import sys

from pccx_flow.cli.main import main

sys.exit(main())
