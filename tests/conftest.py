"""What every test session shares: the demo sets, suites and base models registered once, before collection, as
the nemo-cascade command registers them before it reads a config (tests also build configs that name them)."""
from nemo_cascade.tooling import demo_data

demo_data.register()
