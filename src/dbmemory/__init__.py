"""dbmemory: persistent memory for LLM agents inside your own relational database."""
