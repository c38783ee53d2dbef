"""`make setup` puts the checkout on its virtual environment's path, so the command-line tools
(``.venv/bin/python -m joins``, ``-m datagen``) work from any folder, not only the checkout."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_setup_puts_the_checkout_on_the_venv_path(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    plan = subprocess.run(["make", "-s", "-n", "-B", "setup", f"VENV={venv}"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    # the setup recipe's step that puts the checkout on the path (the others install packages)
    step = re.search(r"^\S+/python -c 'import pathlib.*?skewjoins\.pth.*?$", plan, re.M | re.S)
    assert step, plan
    subprocess.run(["bash", "-c", step.group(0)], cwd=ROOT, check=True)
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import joins.registry; print(joins.registry.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert Path(found.strip()) == ROOT / "joins" / "registry.py"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_help_names_every_target():
    """Every target a user can type (the .PHONY list, without the per-figure patterns) is in
    `make help`, and so are both command-line tools."""
    text = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    phony = re.search(r"^\.PHONY:(.*?)(?<!\\)$", (ROOT / "Makefile").read_text(), re.M | re.S)
    targets = [t for t in phony.group(1).replace("\\", " ").split() if not t.startswith("$(")]
    assert len(targets) > 10
    assert not [t for t in targets if not re.search(rf"\b{re.escape(t)}\b", text)]
    assert "-m joins list|describe|run|compare|stream" in text and "-m datagen" in text
