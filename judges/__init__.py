"""The optional LLM-judge layer: rubrics, prompts, an OpenAI-compatible client, a verdict cache."""
