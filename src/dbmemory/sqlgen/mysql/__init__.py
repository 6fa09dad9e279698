"""The in-database API rendered for MySQL 8 and MariaDB 10.6+ (``sql/mysql/api.sql``): routines
``dbm_memory_<call>``. :mod:`~dbmemory.sqlgen.mysql.api` assembles the script from one module per
part of the Python API the routines mirror: :mod:`~dbmemory.sqlgen.mysql.files`,
:mod:`~dbmemory.sqlgen.mysql.agents`, :mod:`~dbmemory.sqlgen.mysql.expiry`, and the rules they
share, :mod:`~dbmemory.sqlgen.mysql.rules`."""
