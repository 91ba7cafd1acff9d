"""`python -m dse` runs the CLI."""

from dse.cli import app

app()
