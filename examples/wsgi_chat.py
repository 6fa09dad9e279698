"""A chat endpoint in plain WSGI (standard library only) using ``dbmemory.run_turn``.

POST /chat with {"user": "u-42", "message": "..."} answers {"answer": ..., "tool_calls": n}.
The model is DBMEMORY_MODEL (any litellm model name, e.g. gpt-4o-mini with OPENAI_API_KEY);
without it, the scripted stand-in model (no key, deterministic) answers.

Run:  python examples/wsgi_chat.py --serve      (http://127.0.0.1:8000/chat)
      python examples/wsgi_chat.py              (one request through the app, then exits)
      curl -s localhost:8000/chat -d '{"user": "u-42", "message": "I live in Oslo."}'
"""

import json
import os
import sys
from io import BytesIO
from wsgiref.simple_server import make_server
from wsgiref.util import setup_testing_defaults

import dbmemory
from dbmemory.agent import ScriptedModel

engine = dbmemory.create_engine(os.environ.get("DBMEMORY_URL", "sqlite:///memory.db"))
dbmemory.upgrade(engine)
with engine.begin() as conn:
    dbmemory.enable_for_agent(conn, "WEBCHAT", scope="user")

MODEL = os.environ.get("DBMEMORY_MODEL", "scripted")
COMPLETE = ScriptedModel() if MODEL == "scripted" else None  # None: litellm


def app(environ, start_response):
    if environ["PATH_INFO"] != "/chat" or environ["REQUEST_METHOD"] != "POST":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"POST /chat\n"]
    size = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(size) or b"{}")
    result = dbmemory.run_turn(
        engine,  # each step commits its own short transaction; none spans a model call
        agent_code="WEBCHAT",
        user_id=body["user"],  # in a real app: the signed-in user, never the request body
        messages=[{"role": "user", "content": body["message"]}],
        model=MODEL,
        complete=COMPLETE,
    )
    if result.post_processing is not None:
        result.post_processing.wait()  # profile consolidation; a real server lets it run on
    payload = json.dumps({"answer": result.answer, "tool_calls": len(result.tool_calls)}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [payload]


def one_request(message: str) -> dict:
    """Call the app in-process, as a WSGI server would."""
    data = json.dumps({"user": "u-42", "message": message}).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/chat", "CONTENT_LENGTH": str(len(data)),
               "wsgi.input": BytesIO(data)}
    setup_testing_defaults(environ)
    status = []
    body = b"".join(app(environ, lambda s, headers: status.append(s)))
    assert status == ["200 OK"], status
    return json.loads(body)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        with make_server("127.0.0.1", 8000, app) as server:
            print("serving on http://127.0.0.1:8000/chat")
            server.serve_forever()
    else:
        print(one_request("My name is Ada and I live in Oslo."))
        print(one_request("Where do I live?"))
