from ..provenance_cli import main

raise SystemExit(main())
