"""The store layer's statements, built apart from running them: pure functions and prebuilt
SQLAlchemy Core statements with bind parameters, which touch no connection, so each can be
compiled for every dialect (Oracle 19c included) without a server.

* :mod:`~dbmemory.store.statements.reads`: reads, the store-row statements and read touches,
  plus the helpers the others build on (``under_directory``, ``prefix_params``);
* :mod:`~dbmemory.store.statements.writes`: the write path (insert-if-free, updates with and
  without the store counters, the one-file delete and move, audit inserts);
* :mod:`~dbmemory.store.statements.bulk`: expiry, admin and cross-store statements, agent
  configuration;
* :mod:`~dbmemory.store.statements.expiry_set`: the set-based expiry batch of SQLite (its
  candidates in a temporary table);
* :mod:`~dbmemory.store.statements.examples`:
  :func:`~dbmemory.store.statements.examples.example_statements`, every statement by name with
  sample values, for the compile tests.

Rules kept by every builder: the CLOB ``body`` is only selected, inserted or assigned, never
compared, sorted, grouped or DISTINCTed; directory matches use ``SUBSTR(file_path, 1, n) =
:prefix`` (exact: LIKE wildcards and case rules never widen a match); equality on a path uses
``path_hash``; ``IN`` lists hold at most 1,000 values (Oracle's limit); bind names start with
``p_``. What a dialect changes is chosen by :mod:`dbmemory.db.dialect`."""
