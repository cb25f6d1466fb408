"""Say what a bash command does without running it.

    >>> from agentd.bashsec import classify
    >>> classify("git status && ls -la").read_only
    True

The knowledge about programs is data, in programs.toml (loaded by table.py);
classifier.py walks the tree-sitter-bash syntax tree (plain.py reads plain commands
without it) and argv.py reads each simple command's argv against the table, both
carrying context.py's state; shellvars.py knows where bash evaluates a variable's value as code and
every way a command sets one; checks.py and bashbuiltins.py read the arguments of the
programs and builtins whose arguments are a language of their own (sed, awk, find, tar,
sh -c, read, declare, let…). model.py holds the answer.
"""

from agentd.bashsec.classifier import classify, classify_uncached
from agentd.bashsec.model import Classification, SimpleCommand

__all__ = ["Classification", "SimpleCommand", "classify", "classify_uncached"]
