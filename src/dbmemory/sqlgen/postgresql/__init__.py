"""The in-database API rendered for PostgreSQL (``sql/postgresql/api.sql``): the schema
``dbm_memory`` of PL/pgSQL functions. :mod:`~dbmemory.sqlgen.postgresql.api` assembles the script
from one module per part of the Python API the functions mirror:
:mod:`~dbmemory.sqlgen.postgresql.files`, :mod:`~dbmemory.sqlgen.postgresql.agents`,
:mod:`~dbmemory.sqlgen.postgresql.expiry`, and the rules they share,
:mod:`~dbmemory.sqlgen.postgresql.rules`."""
