"""The WebFetch tool (tool.py): URL checks, address guard, the fetch, text, the page cache."""
