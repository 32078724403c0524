"""The HTTP API (FastAPI): writes as authenticated principals, reads at versions, review page.

:func:`claimgraph.http.app.create_app` builds the app over any graph transport (the embedded
graph or the Kafka-backed one); ``claimgraph serve`` runs it under uvicorn.
"""
