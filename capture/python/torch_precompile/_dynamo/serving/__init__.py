"""Serving a Dynamo artifact: the loaders, the installed runnable, and the
artifact's own driver (source parts joined into python_code). See
``_dynamo/__init__.py`` for the stages."""
