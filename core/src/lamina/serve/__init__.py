"""``lamina serve``: Lamina as a long-running HTTP/JSON service for hosts in any language.

One warm ``Assembler`` (plugins resolved, encodings loaded) and the installed session store
(the ledger's) serve every request. ``wire`` holds the request and response types,
``service`` what each endpoint does, ``app`` the ASGI application, ``security`` the bearer
token, loopback and label rules, ``problems`` the error responses, ``command`` the click
command. Only ``app`` and ``command`` (when it runs) import Starlette and uvicorn, so
``lamina --help`` stays instant.
"""
