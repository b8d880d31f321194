"""What every test session shares: the demo sets, suites and base models registered once, before
collection, as the nemo-cascade command registers them before it reads a config (tests also build
configs that name them)."""
import os
import secrets

from nemo_cascade.runtime.server_token import TOKEN_ENV
from nemo_cascade.tooling import demo_data

demo_data.register()
# The token of every served model a test starts (server_token.py), and so of every client in this
# process and in the cascades, launch tasks and Slurm jobs it starts: their environment inherits it.
os.environ.setdefault(TOKEN_ENV, secrets.token_urlsafe(16))
