"""The serving stack, absent here: a script must reach the glue without importing it."""

raise ImportError("fakeengine.server needs the serving stack (uvicorn, ...), which is not installed", name="uvicorn")
