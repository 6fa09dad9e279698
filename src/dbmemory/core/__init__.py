"""The core layer: the rules every other layer builds on, with no database, no model and no I/O.

* :mod:`~dbmemory.core.keys`: scopes and store keys (docs/stores.md),
  :func:`~dbmemory.core.keys.build_store_key` and :func:`~dbmemory.core.keys.parse_store_key`;
* :mod:`~dbmemory.core.paths`: the canonical spelling of a memory path,
  :func:`~dbmemory.core.paths.normalize_path`;
* :mod:`~dbmemory.core.escapes`: the reversible ``_XX`` escape of user ids and LangGraph labels;
* :mod:`~dbmemory.core.model`: the value types (:class:`~dbmemory.core.model.Caps`,
  :class:`~dbmemory.core.model.StoreRef`, :class:`~dbmemory.core.model.FileInfo`,
  :class:`~dbmemory.core.model.FileRecord`, :class:`~dbmemory.core.model.AgentConfig`);
* :mod:`~dbmemory.core.checks`: argument checks by type and column range, run before any SQL;
* :mod:`~dbmemory.core.arguments`: the checks of the public API by argument name, and of the
  value types;
* :mod:`~dbmemory.core.clock`: the one clock (:func:`~dbmemory.core.clock.utcnow`), set by
  tests with :func:`~dbmemory.core.clock.set_clock` or :func:`~dbmemory.core.clock.use_clock`.

Imports only :mod:`dbmemory.errors`. Nothing is imported here: import each name from its module."""
