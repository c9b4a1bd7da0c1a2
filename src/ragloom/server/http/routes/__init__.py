"""The routers of the HTTP API, one per resource; :func:`ragloom.server.http.app.create_app`
builds each for its engine and includes them, the token dependency on all but the health
check."""
