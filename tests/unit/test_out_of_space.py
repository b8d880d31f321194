"""A full disk in one line (files.py): the error found behind another (torch.save reports a failed
write as a RuntimeError raised while handling the OSError), and the line naming the file system
and the project's code that was writing. The full disk itself: test_disk_full.py (integration)."""
from __future__ import annotations

import errno
import fnmatch
from pathlib import Path

import pytest

from nemo_cascade.runtime import files


def _full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_line_names_the_writer_and_the_file_system(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(OSError) as caught:
        files.write_text_atomically(tmp_path / "metrics.json", "{}")
    try:  # as torch.save reports it
        try:
            raise caught.value
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos")
    except RuntimeError as e:
        wrapped = e
    full = files.out_of_space(wrapped)
    assert full is caught.value
    assert files.writer_of(wrapped) == "files.write_text_atomically"
    line = files.out_of_space_line(full, tmp_path, files.writer_of(wrapped))
    assert line.startswith(f"no space left on device writing under {tmp_path} "
                           f"(in files.write_text_atomically): the file system at ")
    assert "\n" not in line and not (tmp_path / "metrics.json").exists()


def test_a_helper_of_files_py_is_not_named_when_the_package_called_it(tmp_path, monkeypatch):
    from nemo_cascade.evaluate.row_progress import RowProgress

    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(OSError) as caught:
        RowProgress(tmp_path, tmp_path).save_suite("tiny-math", {}, {"score": 1.0})
    assert files.writer_of(caught.value) == "row_progress.save_suite"


def test_a_fill_point_names_the_nth_write_matching_its_glob(tmp_path, monkeypatch):
    from nemo_cascade.runtime import faults

    monkeypatch.setattr(faults, "_visits", {})
    monkeypatch.setenv(faults.FILL_ENV, "*/rollouts/*.jsonl:2")
    paths = [tmp_path / name for name in ("rollouts/a.jsonl", "metrics.jsonl", "rollouts/b.jsonl")]
    names = []
    for path in paths:
        names.append(faults._due(faults.FILL_ENV, str(path), names=fnmatch.fnmatchcase))
    assert names == [False, False, True]


def test_a_rust_writers_full_disk_is_found_by_its_os_error_code(tmp_path):
    from safetensors import SafetensorError

    rust = SafetensorError("Error while serializing: I/O error: No space left on device "
                           "(os error 28)")
    full = files.out_of_space(rust)
    assert full.errno == errno.ENOSPC
    assert files.out_of_space_line(full, tmp_path).startswith(
        f"no space left on device writing under {tmp_path}: the file system at ")
    assert files.out_of_space(SafetensorError("I/O error: Permission denied (os error 13)")) is None


def test_other_errors_are_not_a_full_disk():
    assert files.out_of_space(OSError(errno.EACCES, "Permission denied")) is None
    assert files.out_of_space(ValueError("x")) is None
    assert files.writer_of(ValueError("never raised")) == ""
