"""``python -m dbmemory.cli``: the ``dbmemory`` command, for environments without the entry
point on ``PATH`` (a clone run with ``PYTHONPATH=src``, a virtualenv that is not activated)."""

from __future__ import annotations

from dbmemory.cli import main

if __name__ == "__main__":
    main()
