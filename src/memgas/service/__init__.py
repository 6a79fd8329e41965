"""memgas as a service (the ``server`` extra): the REST API, the MCP server, API keys.

Layers: :mod:`.keys` (keys and scopes) and :mod:`.scoped` (the facade as one key sees it) know no HTTP;
:mod:`.app` with :mod:`.routes` is the FastAPI application; :mod:`.mcp` the MCP tools; :mod:`.serve`
runs it. Only :mod:`.keys` and :mod:`.scoped` import without FastAPI installed.
"""
