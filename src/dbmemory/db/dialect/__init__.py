"""The one place that branches on the database's name: every difference between SQLite,
PostgreSQL, MariaDB/MySQL and Oracle, one module per concern.

Nothing else in dbmemory tests ``dialect.name``; it asks these modules, which answer with a
SQLAlchemy construct, a type or a plain fact (the facts behind each choice are in
docs/databases.md):

* :mod:`~dbmemory.db.dialect.base`: which backend a bind talks to, the engine defaults
  (READ COMMITTED on MySQL/MariaDB), the default lock wait, the ``sql/`` script family;
* :mod:`~dbmemory.db.dialect.types`: column types pinned per backend (the body, UTC timestamps,
  ids, the indexed path key);
* :mod:`~dbmemory.db.dialect.setup`: :func:`~dbmemory.db.dialect.setup.configure_engine`, the
  connection set-up of an engine (bounded lock waits, SQLite's ``BEGIN IMMEDIATE`` and WAL);
* :mod:`~dbmemory.db.dialect.txn`: transactions on the driver's connection;
* :mod:`~dbmemory.db.dialect.writes`: the shape of the write path per backend;
* :mod:`~dbmemory.db.dialect.expiry`: reads' touches and the expiry per backend;
* :mod:`~dbmemory.db.dialect.galera`: Galera nodes and causal reads;
* :mod:`~dbmemory.db.dialect.errors`: driver errors recognised and translated into
  :mod:`dbmemory.errors`;
* :mod:`~dbmemory.db.dialect.oracle`: Oracle specifics (19c compilation, the flag type, session
  comparison rules, idempotent DDL);
* :mod:`~dbmemory.db.dialect.health`: the probes of ``dbmemory doctor``.

The modules take tables as arguments and import nothing of :mod:`dbmemory.db.schema`. Nothing is
imported here: import each name from its module."""
