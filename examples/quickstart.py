"""Quickstart: a store for an agent, the MEMORY tool's commands, one transaction per block.

Run:  python examples/quickstart.py          (a SQLite file memory.db in the current directory;
      DBMEMORY_URL=postgresql+psycopg://... python examples/quickstart.py for your database)
"""

import os

import dbmemory
from dbmemory import MemoryTool

engine = dbmemory.create_engine(os.environ.get("DBMEMORY_URL", "sqlite:///memory.db"))
dbmemory.upgrade(engine)  # explicit schema set-up (alembic); a no-op when up to date

with engine.begin() as conn:  # your transaction: enabling memory commits with it
    dbmemory.enable_for_agent(conn, "SUPPORT", scope="user", max_files=200)

with engine.begin() as conn:
    tool = MemoryTool(conn, "SUPPORT", user_id="u-42")
    tool.execute({"command": "delete", "path": "/memories/prefs.md"})  # start afresh (an error text if absent)
    print(tool.execute({"command": "create", "path": "/memories/prefs.md",
                        "file_text": "- prefers e-mail\n- answers in German\n"}))
    print(tool.execute({"command": "str_replace", "path": "/memories/prefs.md",
                        "old_str": "German", "new_str": "English"}))
    print(tool.execute('{"command": "view", "path": "/memories/prefs.md"}'))
    print(tool.execute({"command": "view", "path": "/memories/../etc/passwd"}))  # an error text, never raised

print(dbmemory.tool_schema()["function"]["name"])  # "memory": offer the schema to any model
