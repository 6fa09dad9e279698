"""The in-database API rendered for Oracle 19c+ (``sql/oracle/api.sql``): the package
``dbm_memory``. :mod:`~dbmemory.sqlgen.oracle.api` assembles its specification and body from one
module per part of the Python API the calls mirror: :mod:`~dbmemory.sqlgen.oracle.files`,
:mod:`~dbmemory.sqlgen.oracle.agents`, :mod:`~dbmemory.sqlgen.oracle.expiry`, and the body's
private part, :mod:`~dbmemory.sqlgen.oracle.rules`."""
