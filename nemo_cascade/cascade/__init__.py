"""The cascade: its stages in order with hand-off, gate and resume (driver.py), one stage's loop
(stage.py), and what they rely on — the run's manifest, the checks before a run, the forgetting
gate and its repair, the saves (docs/architecture.md)."""
