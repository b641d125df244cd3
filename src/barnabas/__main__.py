from barnabas.cli import main

raise SystemExit(main())
