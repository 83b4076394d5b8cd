"""The PostgreSQL engine's command families, one module each, named as ``broker/ops`` and ``commands/`` are.

Each module holds one mixin of ``PostgresEngine`` (``bunqueue.storage.postgres.engine``): async methods named
as the ``Engine`` methods of that family, each answering from PostgreSQL with the memory engine's replies and
``CommandError`` texts. They share what ``Family`` declares.
"""
