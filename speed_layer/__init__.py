"""Speed layer (Lambda): real-time views after the batch cutoff, by Structured Streaming."""
