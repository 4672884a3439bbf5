"""cortex-kernel: a Jupyter kernel for an LLM agent that acts while it thinks."""

__version__ = "0.1.0"
