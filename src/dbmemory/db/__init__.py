"""The database layer: engines, the schema, migrations and everything that differs per backend.

* :mod:`~dbmemory.db.engine`: :func:`~dbmemory.db.engine.create_engine`, a configured
  SQLAlchemy Engine from a URL (``DBMEMORY_URL`` or the embedded SQLite file);
* :mod:`~dbmemory.db.schema`: the one schema source, SQLAlchemy Core tables;
* :mod:`~dbmemory.db.migrate` with :mod:`dbmemory.db.migrations`: alembic migrations run from
  Python (:func:`~dbmemory.db.migrate.upgrade`), their own version table
  ``dbm_alembic_version``;
* :mod:`~dbmemory.db.raw`: the hot reads on the DB-API cursor (SQLite);
* :mod:`~dbmemory.db.doctor`: the operator's health check behind ``dbmemory doctor``;
* :mod:`dbmemory.db.dialect`: the only package that branches on the backend's name.

Nothing is imported here: import each name from its module."""
