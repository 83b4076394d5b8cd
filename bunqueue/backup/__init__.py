"""S3 backups of the SQLite file, as the original makes them: a consistent snapshot (SQLite's online backup),
gzipped, published with a ``.meta.json`` beside it (size, SHA-256), the newest ``S3_BACKUP_RETENTION`` kept.

``config`` reads the settings, ``files`` makes and installs database files, ``s3`` talks to the bucket
(boto3, the ``s3`` extra), ``manager`` schedules the server's backups and keeps their metrics, ``cli`` is
``bunqueue backup``, which works on the files and the bucket directly, without a server, as the original's.
"""
