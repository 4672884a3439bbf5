"""An MCP server for notebooks/05_tools_and_sandboxes.ipynb, written with the `mcp` SDK.

`%mcp add letters -- PYTHON mcp_demo.py` starts it over stdio; its tools reach
the agent as `letters__count_vowels` and `letters__spell`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("letters")


@server.tool()
def count_vowels(text: str) -> dict[str, int]:
    """Count the vowels and the consonants of a text."""
    letters = [c for c in text.lower() if c.isalpha()]
    vowels = sum(c in "aeiou" for c in letters)
    return {"vowels": vowels, "consonants": len(letters) - vowels}


@server.tool()
def spell(word: str) -> str:
    """Spell a word letter by letter."""
    return "-".join(word.upper())


if __name__ == "__main__":
    server.run("stdio")
