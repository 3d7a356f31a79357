"""Inputs of the second fresh probe of issue 10, each with its one-line answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from iomodel.errors import IomodelError
from iomodel.spec.config import load_config


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "iomodel.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_brackets_in_messages_survive_the_console(tmp_path):
    """Rich markup ate '[[shape]]' and '[defaults]' out of the messages that say where to fix a sweep."""
    sweep = tmp_path / "s.toml"
    sweep.write_text("shape = 5\n")
    p = _cli("validate", str(sweep), "--interpreter", "-o", str(tmp_path / "r.json"))
    assert p.returncode == 2 and "no [[shape]] entries" in p.stderr, p.stderr


@pytest.mark.parametrize("text, fragment", [
    ('{"num_attention_heads": 32, "num_attention_heads": 8, "hidden_size": 4096, "torch_dtype": "bf16"}',
     "gives the key 'num_attention_heads' twice in one object"),
    ('{"num_attention_heads": ' + "9" * 5000 + ', "hidden_size": 4096}', "holds a number iomodel cannot read"),
])
def test_json_the_reader_cannot_trust_is_one_line(tmp_path, text, fragment):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(IomodelError, match=fragment):
        load_config(path)


def test_an_existing_output_keeps_its_mode(tmp_path):
    from iomodel.paths import write_text

    out = tmp_path / "existing.md"
    out.write_text("old")
    os.chmod(out, 0o640)
    write_text(out, "new", "-o")
    assert out.read_text() == "new" and (out.stat().st_mode & 0o777) == 0o640
