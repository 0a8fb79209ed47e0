"""Rendering a recorded session as the pair (python_code and the cache), and the
form it is served in without Dynamo. See ``_dynamo/__init__.py`` for the stages."""
