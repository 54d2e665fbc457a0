"""The only kopf code: thin handlers that read an object, run one workflow step, and write status."""
