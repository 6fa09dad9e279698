"""Expiry from cron: delete memory files untouched (neither read nor written) for N days.

Each batch of 1,000 files commits on its own, so a long run never holds locks for long and an
interrupted run keeps what it did. Crontab line (every night at 03:15, 90 days; see
examples/crontab.txt):

    15 3 * * *  DBMEMORY_URL=postgresql+psycopg://app@db/prod  python /opt/app/examples/expire_cron.py 90 >> /var/log/dbmemory-expire.log 2>&1

The same with the CLI instead of this script: ``dbmemory expire --days 90``.

Run:  python examples/expire_cron.py [DAYS]     (DBMEMORY_URL, default sqlite:///memory.db)
"""

import datetime as dt
import os
import sys

import dbmemory

days = float(sys.argv[1]) if len(sys.argv) > 1 else 90
engine = dbmemory.create_engine(os.environ.get("DBMEMORY_URL", "sqlite:///memory.db"))
dbmemory.upgrade(engine)

with engine.connect() as conn:
    pending = dbmemory.count_expirable_files(conn, days=days)
deleted = dbmemory.expire_files_committing(engine, days=days)
print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} expired {deleted} of {pending} file(s) untouched for {days:g} days")
engine.dispose()
