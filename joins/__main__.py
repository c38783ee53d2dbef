from joins.cli import main

raise SystemExit(main())
