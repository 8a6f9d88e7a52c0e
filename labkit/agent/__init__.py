"""The agent: its tools, the planner's prompts and parsing, the LangGraph graph, the faithfulness check."""
