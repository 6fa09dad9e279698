"""The in-database API escalates nobody's rights: a role holding only the API role and CREATE
on the tables' schema plants operators and functions that shadow built-ins (the CVE-2018-1058
class), calls the API, and gains nothing; the API belongs to a NOLOGIN owner with DML only; the
install refuses while others may create objects in the API's schema."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.db import migrate
from dbmemory.db.engine import create_engine
from dbmemory.sqlgen.api_common import derived_role_base
from dbmemory.sqlgen.mysql.api import ROUTINES
from sql_api_client import code_of, create_login

# Each hostile object runs, when called, as whoever calls it: it records that role in a session
# setting the hostile session reads afterwards, and tries to grant the hostile role the tables.
_PLANT = """
CREATE FUNCTION public.dbm_trap() RETURNS void LANGUAGE plpgsql AS $t$
BEGIN
    PERFORM set_config('hijack.ran_as', current_user, false);
    BEGIN
        EXECUTE 'GRANT ALL ON public.dbm_files, public.dbm_stores, public.dbm_audit_events TO '
                || quote_ident(session_user);
    EXCEPTION WHEN others THEN NULL;
    END;
END $t$;
GRANT EXECUTE ON FUNCTION public.dbm_trap() TO PUBLIC;
CREATE FUNCTION public.dbm_eq(varchar, text) RETURNS boolean LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN $1::text OPERATOR(pg_catalog.=) $2; END $t$;
CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = text, FUNCTION = public.dbm_eq);
CREATE FUNCTION public.dbm_eq2(text, varchar) RETURNS boolean LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN $1 OPERATOR(pg_catalog.=) $2::text; END $t$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = varchar, FUNCTION = public.dbm_eq2);
CREATE FUNCTION public.dbm_cat(varchar, text) RETURNS text LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN pg_catalog.textcat($1::text, $2); END $t$;
CREATE OPERATOR public.|| (LEFTARG = varchar, RIGHTARG = text, FUNCTION = public.dbm_cat);
CREATE FUNCTION public.length(varchar) RETURNS integer LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN pg_catalog.length($1::text); END $t$;
CREATE FUNCTION public.left(varchar, integer) RETURNS text LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN pg_catalog.left($1::text, $2); END $t$;
CREATE FUNCTION public.substr(varchar, integer, integer) RETURNS text LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN pg_catalog.substr($1::text, $2, $3); END $t$;
CREATE FUNCTION public.lower(varchar) RETURNS text LANGUAGE plpgsql AS $t$
BEGIN PERFORM public.dbm_trap(); RETURN pg_catalog.lower($1::text); END $t$;
"""

# every call of the API, as the hostile role (its own store and the victim's, by key)
_CALLS = [
    "SELECT dbm_memory.open_store('user', p_agent_code => 'SUPPORT', p_user_id => 'mallory')",
    "SELECT dbm_memory.resolve_store_id('user', p_agent_code => 'SUPPORT', p_user_id => 'alice')",
    "SELECT dbm_memory.put_file(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
    " p_user_id => 'mallory'), '/memories/a/b.md', 'x')",
    "SELECT dbm_memory.get_file(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
    " p_user_id => 'mallory'), '/memories/a/b.md')",
    "SELECT * FROM dbm_memory.list_files(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
    " p_user_id => 'mallory'))",
    "SELECT dbm_memory.delete_file(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
    " p_user_id => 'mallory'), '/memories/a/b.md')",
    "SELECT dbm_memory.clear_store_files(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
    " p_user_id => 'mallory'))",
    "SELECT dbm_memory.enable_for_agent('SUPPORT', 'user')",
    "SELECT dbm_memory.disable_for_agent('OTHER', false)",
    "SELECT dbm_memory.expire_files(30)",
]


@pytest.fixture
def pg_database(server_name: str, make_empty_database: Callable[[], URL]) -> Iterator[tuple[URL, Engine]]:
    if server_name != "postgres":
        pytest.skip("PostgreSQL's definer functions and search_path")
    url = make_empty_database()
    engine = create_engine(url)
    migrate.upgrade(engine)
    try:
        yield url, engine
    finally:
        engine.dispose()


def _install(url: URL, role: str) -> None:
    plain = url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--role", role])
    assert result.exit_code == 0, result.output


def test_a_role_that_plants_operators_and_functions_in_public_gains_nothing(
    pg_database: tuple[URL, Engine],
) -> None:
    url, engine = pg_database
    base = derived_role_base(url.database or "")
    user_role, hostile = f"{base}_tu", f"{base}_th"
    _install(url, user_role)
    with engine.begin() as c:
        c.exec_driver_sql(
            "SELECT dbm_memory.put_file(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
            " p_user_id => 'alice'), '/memories/secret.md', 'alice''s secret')")
        c.exec_driver_sql(f'CREATE ROLE "{hostile}" LOGIN')
        c.exec_driver_sql(f'GRANT "{user_role}" TO "{hostile}"')
        c.exec_driver_sql(f'GRANT CREATE, USAGE ON SCHEMA public TO "{hostile}"')
    attacker = create_engine(url.set(username=hostile, password=None))
    try:
        with attacker.connect() as c:
            raw = c.connection.dbapi_connection
            cursor = raw.cursor()
            succeeded: list[str] = []
            cursor.execute(_PLANT)
            raw.commit()
            # its own identity, so the calls on its own store run to the end
            cursor.execute("SELECT set_config('dbm_memory.user_id', 'mallory', false)")
            for call in _CALLS:
                cursor.execute("SAVEPOINT call")
                try:
                    cursor.execute(call)
                    cursor.fetchall()
                    succeeded.append(call)
                except Exception:  # noqa: BLE001 - an API error is fine; running the trap is not
                    cursor.execute("ROLLBACK TO SAVEPOINT call")
            cursor.execute("SELECT current_setting('hijack.ran_as', true)")
            ran_as = cursor.fetchone()[0]
            raw.commit()
            cursor.execute(
                "SELECT has_table_privilege(current_user, 'public.dbm_files', 'SELECT'),"
                " has_table_privilege(current_user, 'public.dbm_stores', 'UPDATE')")
            rights = cursor.fetchone()
            raw.commit()
            # the planted objects do work when someone resolves names in public
            cursor.execute("SELECT length('abc'::varchar)")
            cursor.fetchall()
            cursor.execute("SELECT current_setting('hijack.ran_as', true)")
            assert cursor.fetchone()[0] == hostile
            raw.rollback()
    finally:
        attacker.dispose()
    assert ran_as in (None, ""), f"the API ran a planted object as {ran_as}"
    assert len(succeeded) >= 6, succeeded  # the file calls on its own store ran to the end
    assert tuple(rights) == (False, False)


def test_the_api_belongs_to_a_nologin_owner_with_dml_only(pg_database: tuple[URL, Engine]) -> None:
    url, engine = pg_database
    _install(url, f"{derived_role_base(url.database or '')}_tu")
    owner = f"{derived_role_base(url.database or '')}_owner"
    with engine.connect() as c:
        role = c.execute(sa.text(
            "SELECT rolcanlogin, rolsuper, rolcreaterole, rolbypassrls FROM pg_roles"
            " WHERE rolname = :r"), {"r": owner}).one()
        assert tuple(role) == (False, False, False, False)
        owners = c.execute(sa.text(
            "SELECT DISTINCT pg_get_userbyid(p.proowner), p.prosecdef, p.proconfig::text"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'dbm_memory'")).all()
        assert owners == [(owner, True, "{\"search_path=pg_catalog, pg_temp\"}")]
        schema_owner = c.execute(sa.text(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'dbm_memory'")).scalar()
        assert schema_owner == owner
        rights = c.execute(sa.text(
            "SELECT has_table_privilege(:r, 'dbm_files', 'SELECT'),"
            " has_table_privilege(:r, 'dbm_files', 'TRUNCATE'),"
            " has_table_privilege(:r, 'dbm_files', 'REFERENCES'),"
            " has_table_privilege(:r, 'dbm_files', 'TRIGGER'),"
            " has_table_privilege(:r, 'dbm_alembic_version', 'SELECT'),"
            " has_schema_privilege(:r, 'public', 'CREATE')"), {"r": owner}).one()
        assert tuple(rights) == (True, False, False, False, False, False)
        tables_owner = c.execute(sa.text(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'dbm_files'")).scalar()
        assert tables_owner != owner


def test_install_refuses_while_others_may_create_in_the_api_schema(
    pg_database: tuple[URL, Engine],
) -> None:
    url, engine = pg_database
    base = derived_role_base(url.database or "")
    _install(url, f"{base}_tu")
    with engine.begin() as c:
        c.exec_driver_sql(f'CREATE ROLE "{base}_to" NOLOGIN')
        c.exec_driver_sql(f'GRANT CREATE ON SCHEMA dbm_memory TO "{base}_to"')
    plain = url.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain])
    assert result.exit_code != 0
    assert f"{base}_to may CREATE in schema dbm_memory" in result.output
    with engine.begin() as c:
        c.exec_driver_sql(f'REVOKE CREATE ON SCHEMA dbm_memory FROM "{base}_to"')
        c.exec_driver_sql("GRANT CREATE ON SCHEMA dbm_memory TO PUBLIC")
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain])
    assert result.exit_code != 0 and "PUBLIC (every role) may CREATE" in result.output
    with engine.begin() as c:
        c.exec_driver_sql("REVOKE CREATE ON SCHEMA dbm_memory FROM PUBLIC")
    result = CliRunner().invoke(app, ["db", "install-api", "--url", plain])
    assert result.exit_code == 0, result.output


def test_mariadb_routines_run_as_a_locked_account_with_dml_only(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name != "mysql":
        pytest.skip("MySQL/MariaDB's DEFINER accounts")
    url = make_empty_database()
    engine = create_engine(url)
    base = derived_role_base(url.database or "")
    role, login = f"{base}_tu", f"{base}_tl"
    try:
        migrate.upgrade(engine)
        _install(url, role)
        definer = f"{base}_owner@localhost"
        with engine.begin() as c:
            definers = set(c.execute(sa.text(
                "SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()"
            )).scalars())
            assert definers == {definer}
            grants = [g for (g,) in c.execute(sa.text(f"SHOW GRANTS FOR '{base}_owner'@'localhost'"))]
            tables = [g for g in grants if "`.`dbm_" in g and "PROCEDURE" not in g and "FUNCTION" not in g]
            assert all(g.startswith("GRANT SELECT, INSERT, UPDATE, DELETE ON ") for g in tables), grants
            database = [g for g in grants if "`.* TO" in g]
            assert [g.split(" ON ")[0] for g in database] == ["GRANT CREATE TEMPORARY TABLES"], grants
            assert len(tables) == 6 and any("USAGE ON *.*" in g for g in grants)
            assert len(grants) == 1 + 1 + 6 + len(ROUTINES), grants  # USAGE, temporary tables, DML, routines
            locked = c.execute(sa.text(f"SHOW CREATE USER '{base}_owner'@'localhost'")).scalar()
            assert "ACCOUNT LOCK" in locked
            c.exec_driver_sql(f"CREATE USER '{login}'@'%%'")
            c.exec_driver_sql(f"GRANT {role} TO '{login}'@'%%'")
            c.exec_driver_sql(f"SET DEFAULT ROLE {role} FOR '{login}'@'%%'")
        caller = create_engine(url.set(username=login, password=None))
        try:
            with caller.connect() as c:
                c.exec_driver_sql("START TRANSACTION")
                c.exec_driver_sql("SET @dbm_memory_user_id = 'alice'")  # bound to alice's stores
                c.exec_driver_sql(
                    "CALL dbm_memory_open_store('user', 'SUPPORT', 'alice', NULL, NULL, NULL, NULL, @s)")
                c.exec_driver_sql("CALL dbm_memory_put_file(@s, '/memories/a.md', 'hello', 'alice', @v)")
                assert c.exec_driver_sql("SELECT dbm_memory_get_file(@s, '/memories/a.md')").scalar() == "hello"
                c.exec_driver_sql("COMMIT")
                with pytest.raises(sa.exc.DBAPIError):
                    c.exec_driver_sql("SELECT * FROM dbm_files")
        finally:
            caller.dispose()
    finally:
        engine.dispose()


def _calls(server_name: str) -> dict[str, str]:
    if server_name == "postgres":
        return {
            "open": "SELECT dbm_memory.open_store('agent', p_agent_code => 'ROLES')",
            "enable": "SELECT dbm_memory.enable_for_agent('ROLES')",
            "disable": "SELECT dbm_memory.disable_for_agent('ROLES', true)",
            "expire": "SELECT dbm_memory.expire_files(30)",
        }
    return {
        "open": "CALL dbm_memory_open_store('agent', 'ROLES', NULL, NULL, NULL, NULL, NULL, @s)",
        "enable": "CALL dbm_memory_enable_for_agent('ROLES', 'agent', NULL, NULL, NULL, NULL, NULL, @e)",
        "disable": "CALL dbm_memory_disable_for_agent('ROLES', 1, @d)",
        "expire": "CALL dbm_memory_expire_files(30, NULL, @x)",
    }


def _allowed(engine: Engine, server_name: str, sql: str) -> bool:
    with engine.connect() as c:
        c.exec_driver_sql("START TRANSACTION" if server_name == "mysql" else "BEGIN")
        try:
            c.exec_driver_sql(sql)
        except sa.exc.DBAPIError as exc:
            if code_of(exc) is not None:
                return True  # the routine ran and answered with one of its errors
            denied = "permission denied" in str(exc) or "command denied" in str(exc)
            assert denied, exc
            return False
        finally:
            c.rollback()
    return True


def test_the_user_role_cannot_run_admin_calls_and_the_admin_role_cannot_run_file_calls(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name not in ("postgres", "mysql"):
        pytest.skip("PostgreSQL and MariaDB")
    url = make_empty_database()
    engine = create_engine(url)
    base = derived_role_base(url.database or "")
    try:
        migrate.upgrade(engine)
        plain = url.render_as_string(hide_password=False)
        result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"])
        assert result.exit_code == 0, result.output
        assert f"role {base}_user may execute the file calls" in result.output
        create_login(engine, server_name, f"{base}_lu", f"{base}_user")
        create_login(engine, server_name, f"{base}_la", f"{base}_admin")
        as_user = create_engine(url.set(username=f"{base}_lu", password=None))
        as_admin = create_engine(url.set(username=f"{base}_la", password=None))
        calls = _calls(server_name)
        try:
            assert {k: _allowed(as_user, server_name, sql) for k, sql in calls.items()} == {
                "open": True, "enable": False, "disable": False, "expire": False}
            assert {k: _allowed(as_admin, server_name, sql) for k, sql in calls.items()} == {
                "open": False, "enable": True, "disable": True, "expire": True}
        finally:
            as_user.dispose()
            as_admin.dispose()
    finally:
        engine.dispose()


def test_two_databases_installed_with_defaults_share_no_role(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name not in ("postgres", "mysql"):
        pytest.skip("PostgreSQL and MariaDB")
    first, second = make_empty_database(), make_empty_database()
    for url in (first, second):
        engine = create_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        result = CliRunner().invoke(
            app, ["db", "install-api", "--url", url.render_as_string(hide_password=False), "--roles"])
        assert result.exit_code == 0, result.output
    base = derived_role_base(first.database or "")
    assert base != derived_role_base(second.database or "")
    engine = create_engine(second)
    try:
        create_login(engine, server_name, f"{base}_lu", f"{base}_user")  # database 1's user role
    finally:
        engine.dispose()
    # a login meant for database 1 reaches nothing of database 2's API
    other = create_engine(second.set(username=f"{base}_lu", password=None))
    try:
        assert not _allowed(other, server_name, _calls(server_name)["open"])
    except sa.exc.OperationalError:
        pass  # MariaDB: no right at all in database 2, so it may not even connect
    finally:
        other.dispose()


def test_the_user_role_reaches_only_the_stores_of_its_session_identity(
    pg_database: tuple[URL, Engine],
) -> None:
    url, engine = pg_database
    base = derived_role_base(url.database or "")
    plain = url.render_as_string(hide_password=False)
    assert CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"]).exit_code == 0
    with engine.begin() as c:  # the owner's side: stores of two users, and an agent store
        for user in ("alice", "bob", "carol"):
            c.exec_driver_sql(
                "SELECT dbm_memory.put_file(dbm_memory.open_store('user', p_agent_code => 'SUPPORT',"
                f" p_user_id => '{user}'), '/memories/secret.md', '{user} secret')")
    create_login(engine, "postgres", f"{base}_lu", f"{base}_user")
    caller = create_engine(url.set(username=f"{base}_lu", password=None))
    seen: dict[str | None, set[str]] = {}
    try:
        for identity in ("alice", None):
            with caller.connect() as c:
                raw = c.connection.dbapi_connection
                cursor = raw.cursor()
                if identity is not None:
                    cursor.execute("SELECT set_config('dbm_memory.user_id', %s, false)", (identity,))
                texts: set[str] = set()
                for store_id in range(1, 51):  # walking the ids
                    for sql in ("SELECT dbm_memory.get_file(%s, '/memories/secret.md')",
                                "SELECT path FROM dbm_memory.list_files(%s)"):
                        cursor.execute("SAVEPOINT walk")
                        try:
                            cursor.execute(sql, (store_id,))
                            texts.update(str(r[0]) for r in cursor.fetchall())
                        except Exception as exc:  # noqa: BLE001 - refusals are what is expected
                            assert "not_found" in str(exc), exc
                            cursor.execute("ROLLBACK TO SAVEPOINT walk")
                    cursor.execute("SAVEPOINT walk")
                    try:  # no write lands in another user's store either
                        cursor.execute("SELECT dbm_memory.put_file(%s, '/memories/planted.md', 'x')",
                                       (store_id,))
                        texts.add(f"wrote {store_id}")
                    except Exception:  # noqa: BLE001
                        cursor.execute("ROLLBACK TO SAVEPOINT walk")
                for other in ("bob", "alice"):
                    cursor.execute("SAVEPOINT walk")
                    try:
                        cursor.execute("SELECT dbm_memory.resolve_store_id('user', p_agent_code => 'SUPPORT',"
                                       " p_user_id => %s)", (other,))
                        texts.add(f"resolved {other}")
                    except Exception:  # noqa: BLE001
                        cursor.execute("ROLLBACK TO SAVEPOINT walk")
                raw.rollback()
                seen[identity] = texts
    finally:
        caller.dispose()
    alice_store = 1  # the first store created
    assert seen["alice"] == {"alice secret", "/memories/secret.md", f"wrote {alice_store}", "resolved alice"}
    assert seen[None] == set()


def test_mariadb_install_with_roles_by_an_account_without_create_user_fails_before_installing(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name != "mysql":
        pytest.skip("MySQL/MariaDB accounts")
    url = make_empty_database()
    engine = create_engine(url)
    base = derived_role_base(url.database or "")
    installer = f"{base}_li"
    try:
        migrate.upgrade(engine)
        with engine.begin() as c:
            c.exec_driver_sql(f"CREATE USER '{installer}'@'%%'")
            c.exec_driver_sql(f"GRANT ALL PRIVILEGES ON `{url.database}`.* TO '{installer}'@'%%'")
        plain = url.set(username=installer, password=None).render_as_string(hide_password=False)
        result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, "--roles"])
        assert result.exit_code != 0
        assert "lacks the CREATE USER privilege" in result.output
        assert "nothing was installed" in result.output
        assert "unexpected" not in result.output
        with engine.connect() as c:
            assert c.execute(sa.text(
                "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()"
            )).scalar() == 0
        # without roles it installs, running as the installer, and says why
        result = CliRunner().invoke(app, ["db", "install-api", "--url", plain])
        assert result.exit_code == 0, result.output
        assert f"it runs as {installer}@%" in result.output and "Note:" in result.output
    finally:
        engine.dispose()


def test_uninstall_leaves_no_object_and_no_role_behind(
    server_name: str, make_empty_database: Callable[[], URL]
) -> None:
    if server_name not in ("postgres", "mysql"):
        pytest.skip("PostgreSQL and MariaDB")
    url = make_empty_database()
    engine = create_engine(url)
    base = derived_role_base(url.database or "")
    plain = url.render_as_string(hide_password=False)
    try:
        migrate.upgrade(engine)
        for args in (["--roles"], ["--role", f"{base}_nu", "--admin-role", f"{base}_na"]):
            result = CliRunner().invoke(app, ["db", "install-api", "--url", plain, *args])
            assert result.exit_code == 0, result.output
        result = CliRunner().invoke(app, ["db", "uninstall-api", "--url", plain, "--role",
                                          f"{base}_nu", "--admin-role", f"{base}_na"])
        assert result.exit_code == 0, result.output
        with engine.connect() as c:
            if server_name == "postgres":
                left = c.execute(sa.text(
                    "SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname = 'dbm_memory'"
                    " UNION ALL SELECT 'function ' || p.proname FROM pg_proc p"
                    " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'dbm_memory'"
                    " UNION ALL SELECT 'role ' || rolname FROM pg_roles WHERE rolname LIKE :b"
                    " UNION ALL SELECT 'grant to ' || grantee FROM information_schema.role_table_grants"
                    " WHERE grantee LIKE :b"),
                    {"b": base + "%"}).scalars().all()
            else:
                left = c.execute(sa.text(
                    "SELECT CONCAT('routine ', ROUTINE_NAME) FROM information_schema.ROUTINES"
                    " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE 'dbm_memory%'"
                    " UNION ALL SELECT CONCAT('account ', user) FROM mysql.user WHERE user LIKE :b"),
                    {"b": base + "%"}).scalars().all()
            assert left == []
            assert c.execute(sa.text("SELECT COUNT(*) FROM dbm_stores")).scalar() == 0  # tables stay
    finally:
        engine.dispose()
