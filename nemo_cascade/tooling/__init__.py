"""The tooling around the training core: the command line (``cli``), the memory / time planner's
output (``plan_table``, ``plan_time``), nemo-run launches (``launch``), ``doctor``, ``data prepare``
(``prepare/``), standalone evaluation of a checkpoint (``standalone``), the run report (``report``,
``paired``), run comparison (``compare``) and release conversion (``release``, ``model_card``).
These modules import the core; the core never imports them (tests/unit/test_import_rules.py)."""
