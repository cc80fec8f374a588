from spellbook.cli import run

run()
