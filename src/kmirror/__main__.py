from kmirror.cli.main import main

raise SystemExit(main())
