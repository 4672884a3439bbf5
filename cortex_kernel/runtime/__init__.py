"""The runtime: eager DAG scheduler, agent loop, variables, transcripts."""
