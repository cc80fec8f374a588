from spellbook.cli import main

raise SystemExit(main())
