"""A memory write committed together with an order row, and rolled back with it.

Memory writes join the caller's transaction: when the order fails, the note about it is never
written either, so the memory never says something that did not happen.

Run:  python examples/order_with_memory.py   (SQLite file orders.db here, or DBMEMORY_URL)
"""

import os

import sqlalchemy as sa

import dbmemory
from dbmemory import MemoryTool

engine = dbmemory.create_engine(os.environ.get("DBMEMORY_URL", "sqlite:///orders.db"))
dbmemory.upgrade(engine)

orders = sa.Table(  # your own table, beside dbmemory's
    "shop_orders",
    sa.MetaData(),
    sa.Column("order_id", sa.Integer, primary_key=True),
    sa.Column("customer", sa.String(40), nullable=False),
    sa.Column("amount", sa.Numeric(10, 2), sa.CheckConstraint("amount > 0"), nullable=False),
)
orders.create(engine, checkfirst=True)

with engine.begin() as conn:
    dbmemory.enable_for_agent(conn, "SALES", scope="user")
    conn.execute(orders.delete())
    MemoryTool(conn, "SALES", user_id="c-7").execute({"command": "delete", "path": "/memories/orders"})


def place_order(order_id: int, amount: str) -> None:
    """One transaction: the order row and the agent's note about it."""
    with engine.begin() as conn:
        tool = MemoryTool(conn, "SALES", user_id="c-7")
        print(tool.execute({"command": "create", "path": f"/memories/orders/{order_id}.md",
                            "file_text": f"Order {order_id}: {amount} EUR, paid by card\n"}))
        conn.execute(orders.insert().values(order_id=order_id, customer="c-7", amount=amount))


place_order(1, "42.50")
try:
    place_order(2, "-5.00")  # the CHECK constraint refuses it: the note rolls back with the row
except sa.exc.IntegrityError:
    print("order 2 refused by the database: its memory note was rolled back with it")

with engine.connect() as conn:
    print("orders:", [row.order_id for row in conn.execute(sa.select(orders.c.order_id))])
    print(MemoryTool(conn, "SALES", user_id="c-7").execute({"command": "view", "path": "/memories/orders"}))
