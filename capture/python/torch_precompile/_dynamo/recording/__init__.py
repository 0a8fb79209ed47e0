"""Recording a Dynamo capture: the session (Dynamo under a CompilePackage, each
graph lowered to its program as it is compiled) and the guard ledger with the
rules that judge each dropped guard. See ``_dynamo/__init__.py`` for the stages."""
