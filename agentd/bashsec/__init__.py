"""Say what a bash command does without running it.

    >>> from agentd.bashsec import classify
    >>> classify("git status && ls -la").read_only
    True

The knowledge about programs is data, in programs.toml; classifier.py walks the
tree-sitter-bash syntax tree; checks.py reads the arguments of the few programs whose
arguments are a language of their own (sed, awk, find, tar, sh -c…).
"""

from agentd.bashsec.classifier import classify, classify_uncached
from agentd.bashsec.model import Classification, SimpleCommand

__all__ = ["Classification", "SimpleCommand", "classify", "classify_uncached"]
