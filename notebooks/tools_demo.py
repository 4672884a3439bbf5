"""Python tools for notebooks/05_tools_and_sandboxes.ipynb (``tools_demo:word_stats``)."""

from __future__ import annotations


def word_stats(text: str, longest: int = 3) -> dict[str, object]:
    """Count the words of a text and find its longest ones.

    Parameters
    ----------
    text : str
        The text to look at.
    longest : int
        How many of the longest words to return.
    """
    words = [w.strip(".,;:!?") for w in text.split()]
    ranked = sorted(set(words), key=lambda w: (-len(w), w))
    return {"words": len(words), "longest": ranked[:longest]}
