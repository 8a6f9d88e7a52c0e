"""The agent: its tools, the planner (prompts; calls checked by the question, the corpus' scope and for model
markup), the LangGraph graph, the faithfulness check with citations."""
