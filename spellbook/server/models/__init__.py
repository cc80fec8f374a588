"""The typed results of the MCP tools: each model's JSON schema is its tool's published ``outputSchema``.

They mirror the dicts the engine returns, key for key: a key the engine adds only sometimes (``note``,
``redacted``, ``unreadable``...) is an optional field, absent from the result when the engine left it
out. A tool returns ``Annotated[CallToolResult, Model]``: the SDK publishes the model's schema and
validates the structured content against it, while the tool keeps its short text for the model
(``tools_common.tool_result``). tests/engine/test_tool_schemas.py checks, tool by tool over a real client,
that every key the engine returns is declared.

base (the compact schema, pieces several tools share), then one module per group of tools: core
(tools.py), structure, knowledge, history, exchange (tools_<group>.py).
"""
