"""The store layer: files and stores on the caller's ``Connection``, under the MEMORY tool, the
admin API, profiles and items.

Every function here takes a SQLAlchemy ``Connection`` first, joins the caller's transaction and
never commits or rolls back one it did not open; writers lock the store row first, then file
rows; every change writes one audit event in the same transaction. Statements are built in
:mod:`dbmemory.store.statements` and run by the modules beside it:

* :mod:`~dbmemory.store.files`: creating and changing files (``create``, ``str_replace`` and
  ``insert`` edits, the admin upsert :func:`~dbmemory.store.files.put_file`);
* :mod:`~dbmemory.store.moves`: deleting, renaming and clearing them;
* :mod:`~dbmemory.store.reads`: listings, one file, the MEMORY tool's ``view``;
* :mod:`~dbmemory.store.trees`: a tree of local files into a store and out of it;
* :mod:`~dbmemory.store.expiry`: deleting files untouched for N days;
* :mod:`~dbmemory.store.touches`: the durable record of a read;
* :mod:`~dbmemory.store.agents`, :mod:`~dbmemory.store.resolve`, :mod:`~dbmemory.store.drop`:
  agent configurations, which store a run uses, dropping stores;
* :mod:`~dbmemory.store.units` (the write unit: savepoint or own transaction),
  :mod:`~dbmemory.store.locks` (store and file locks, cap and shape checks),
  :mod:`~dbmemory.store.caps` (the caps rule), :mod:`~dbmemory.store.audit` (audit rows): what
  the writers share.

Nothing is imported here: import each name from its module. The public names are also exposed
by :mod:`dbmemory` itself."""
