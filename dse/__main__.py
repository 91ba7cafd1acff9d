"""`python -m dse` runs the CLI."""

from dse.entry import main

main()
