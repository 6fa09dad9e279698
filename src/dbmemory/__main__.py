"""``python -m dbmemory``: the same as the ``dbmemory`` command."""

from __future__ import annotations

from dbmemory.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main()
