"""The Anthropic SDK's tool runner with dbmemory's drop-in memory tool.

``DbMemoryTool`` answers the model exactly as the SDK's ``BetaLocalFilesystemMemoryTool`` does,
from a database store. With ANTHROPIC_API_KEY set this runs Claude through the SDK's tool
runner; without it, it calls the tool directly as the runner would, so it runs anywhere.

Run:  pip install -e ".[anthropic]"; python examples/anthropic_tool_runner.py
"""

import os

import dbmemory
from dbmemory.integrations.anthropic_tool import DbMemoryTool

engine = dbmemory.create_engine(os.environ.get("DBMEMORY_URL", "sqlite:///memory.db"))
dbmemory.upgrade(engine)
with engine.begin() as conn:
    dbmemory.enable_for_agent(conn, "CLAUDE", scope="user")

memory = DbMemoryTool(engine, "CLAUDE", user_id="u-42")  # was: BetaLocalFilesystemMemoryTool()

if os.environ.get("ANTHROPIC_API_KEY"):
    from anthropic import Anthropic

    runner = Anthropic().beta.messages.tool_runner(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
        max_tokens=1024,
        tools=[memory],
        messages=[{"role": "user", "content": "Remember that I prefer tea over coffee."}],
    )
    for message in runner:  # each model turn; the runner executes the memory tool calls
        for block in message.content:
            if block.type == "text":
                print(block.text)
else:
    print("ANTHROPIC_API_KEY is not set: calling the tool as the SDK's runner would")
    memory.clear_all_memory()
    for call in (
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/preferences.md", "file_text": "Prefers tea over coffee.\n"},
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/preferences.md"},
    ):
        print(memory.call(call))  # the runner sends tool_use.input here
