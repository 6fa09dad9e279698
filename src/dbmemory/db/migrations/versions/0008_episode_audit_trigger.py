"""The ``episode_add`` audit event written by the database with the episode's own ``INSERT``.

Revision ID: 0008
Revises: 0007

A turn keeps its exchange as one row of ``dbm_episodes`` (:mod:`dbmemory.items.episodes`) and
one content-free ``episode_add`` audit event. Until this revision those were two statements of
the turn's post-processing; now the trigger ``dbm_episodes_audit_ai`` (``AFTER INSERT``, for
each row) writes the event inside the episode's ``INSERT``, so keeping an episode is one
statement and the event can never be missing or left without its row:

* action ``episode_add``, actor ``turn``, the organisation and encoded user of the row,
  ``chars_after`` its ``char_count``, ``detail_text`` ``episode <episode_id>``, ``created_at``
  its ``created_at``; never its text.
* SQLite, MySQL/MariaDB: a one-statement trigger; PostgreSQL: the trigger function
  ``dbm_episodes_audit()`` (PL/pgSQL); Oracle: a PL/SQL trigger (``CREATE OR REPLACE``, so a
  run that failed half-way can be run again; compiled and reviewed, never run here).

The downgrade drops the trigger (and PostgreSQL's function); the writer of revision 0007 wrote
the event itself, so code older than this revision on a database at 0008 records each episode's
event twice (upgrade the code and the schema together). MySQL/MariaDB with binary logging on
need ``log_bin_trust_function_creators=1`` or the ``SUPER``/``BINLOG ADMIN`` privilege for the
user that runs the migration to create a trigger.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGGER = "dbm_episodes_audit_ai"
"""The trigger's name (every backend)."""

_COLUMNS = "action_name, actor_name, chars_after, detail_text, created_at, org_id, user_key"


def _insert(new: str, detail: str) -> str:
    """The trigger's ``INSERT`` (``new``: how the body names the new row)."""
    return (
        f"INSERT INTO dbm_audit_events ({_COLUMNS}) VALUES ('episode_add', 'turn', "
        f"{new}.char_count, {detail}, {new}.created_at, {new}.org_id, {new}.user_key)"
    )


SQLITE_DDL = (
    f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON dbm_episodes BEGIN "
    + _insert("new", "'episode ' || new.episode_id")
    + "; END",
)

MYSQL_DDL = (
    f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON dbm_episodes FOR EACH ROW "
    + _insert("NEW", "CONCAT('episode ', NEW.episode_id)"),
)

POSTGRESQL_DDL = (
    "CREATE FUNCTION dbm_episodes_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    + _insert("NEW", "'episode ' || NEW.episode_id")
    + "; RETURN NULL; END $$",
    f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON dbm_episodes FOR EACH ROW "
    "EXECUTE FUNCTION dbm_episodes_audit()",
)

ORACLE_DDL = (
    f"CREATE OR REPLACE TRIGGER {TRIGGER} AFTER INSERT ON dbm_episodes FOR EACH ROW BEGIN "
    + _insert("\\:NEW", "'episode ' || \\:NEW.episode_id")
    + "; END;",
)
"""Oracle's trigger (``\\:`` keeps alembic's ``text()`` from reading ``:NEW`` as a parameter)."""


def upgrade() -> None:
    """Create the trigger that writes the ``episode_add`` audit event."""
    dialect = op.get_context().dialect.name
    statements: tuple[str, ...] = {
        "sqlite": SQLITE_DDL,
        "postgresql": POSTGRESQL_DDL,
        "mysql": MYSQL_DDL,
        "mariadb": MYSQL_DDL,
        "oracle": ORACLE_DDL,
    }.get(dialect, ())
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    """Drop the trigger (and PostgreSQL's function)."""
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        op.execute(f"DROP TRIGGER {TRIGGER} ON dbm_episodes")
        op.execute("DROP FUNCTION dbm_episodes_audit()")
    else:
        op.execute(f"DROP TRIGGER {TRIGGER}")
