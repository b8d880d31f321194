"""One error base class (nemo_cascade/errors.py): every user-facing error is a CascadeError, keeps
the builtin base its callers catch, and the command line turns any CascadeError -- also one it has
never heard of -- into one line with exit code 2."""
from __future__ import annotations

import pytest

from nemo_cascade.tooling import cli
from nemo_cascade.checkpoint import CheckpointError
from nemo_cascade.config import ConfigError
from nemo_cascade.convert.shape import ModelFilesError
from nemo_cascade.tooling.release import ConvertError
from nemo_cascade.data.loader import DataError
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.errors import CascadeError
from nemo_cascade.tooling.report import ReportError
from nemo_cascade.evaluate.suites import EvalError
from nemo_cascade.rewards.http_endpoint import RewardServerError
from nemo_cascade.tooling.run_lock import RunLocked
from nemo_cascade.cascade.stage import ServerStop

# The classes the CLI once listed one by one, with the builtin base their other callers catch them
# by.
USER_ERRORS = [(ConfigError, ValueError), (ModelFilesError, ValueError), (DataError, ValueError),
               (EvalError, ValueError), (ReportError, ValueError), (ConvertError, ValueError),
               (CheckpointError, ValueError), (ServerStop, RuntimeError),
               (RewardServerError, RuntimeError), (RunLocked, Exception), (SchemaError, ValueError)]


@pytest.mark.parametrize("cls,builtin", USER_ERRORS, ids=[c.__name__ for c, _ in USER_ERRORS])
def test_user_errors_are_cascade_errors_and_keep_their_builtin_base(cls, builtin):
    assert issubclass(cls, CascadeError) and issubclass(cls, builtin)


def test_cli_catches_any_cascade_error_as_one_line(monkeypatch, capsys, tmp_path):
    class BrandNewError(CascadeError):
        pass

    def cmd_report(args):
        raise BrandNewError(f"{args.run_dir[0]}: expected a brand-new thing")

    # the subcommand, looked up by main() when it dispatches
    monkeypatch.setattr(cli, "cmd_report", cmd_report)
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"nemo-cascade: error: {tmp_path}: expected a brand-new thing"


def test_other_exceptions_are_not_swallowed(monkeypatch, tmp_path):
    def cmd_report(args):  # a bug, not a user mistake: its traceback must reach the user
        raise KeyError("bug")

    monkeypatch.setattr(cli, "cmd_report", cmd_report)
    with pytest.raises(KeyError):
        cli.main(["report", str(tmp_path)])
