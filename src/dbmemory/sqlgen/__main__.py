"""``python -m dbmemory.sqlgen``: write or check the scripts under ``sql/``."""

from dbmemory.sqlgen import main

raise SystemExit(main())
